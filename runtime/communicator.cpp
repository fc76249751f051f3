#include "runtime/communicator.h"

#include <cstring>

namespace kiln::runtime {
namespace {

class InProcessCommunicator final : public Communicator {
public:
  explicit InProcessCommunicator(int devices) : devices_(devices) {}
  int worldSize() const override { return devices_; }
  int firstLocalRank() const override { return 0; }
  int localSize() const override { return devices_; }

  Status allReduceSum(const std::vector<float *> &local, int64_t n) override {
    if (static_cast<int>(local.size()) != devices_)
      return Error("allreduce: " + std::to_string(local.size()) + " buffers for " +
                   std::to_string(devices_) + " devices");
    // Summed in rank order into the first device's buffer (one device
    // holds the sum already), then copied to the others.
    float *sum = local[0];
    for (size_t r = 1; r < local.size(); ++r)
      for (int64_t i = 0; i < n; ++i)
        sum[i] += local[r][i];
    for (size_t r = 1; r < local.size(); ++r)
      std::memcpy(local[r], sum, static_cast<size_t>(n) * sizeof(float));
    return Status::ok();
  }

  Status broadcast(const std::vector<void *> &local, int64_t bytes, int root) override {
    if (root < 0 || root >= devices_ || static_cast<int>(local.size()) != devices_)
      return Error("broadcast: bad root " + std::to_string(root));
    for (int r = 0; r < devices_; ++r)
      if (r != root)
        std::memcpy(local[r], local[root], static_cast<size_t>(bytes));
    return Status::ok();
  }

private:
  int devices_;
};

} // namespace

std::unique_ptr<Communicator> makeInProcessCommunicator(int devices) {
  return std::make_unique<InProcessCommunicator>(devices);
}

} // namespace kiln::runtime
