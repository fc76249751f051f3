#include "runtime/communicator.h"

#include <algorithm>
#include <cstring>

#include "support/thread_pool.h"

namespace kiln::runtime {
namespace {

class InProcessCommunicator final : public Communicator {
public:
  explicit InProcessCommunicator(int devices) : devices_(devices) {}
  int worldSize() const override { return devices_; }
  int firstLocalRank() const override { return 0; }
  int localSize() const override { return devices_; }

  Status allReduceSum(const std::vector<float *> &local, int64_t n) override {
    return sum(local, n, true);
  }

  Status reduceSumToFirst(const std::vector<float *> &local, int64_t n) override {
    return sum(local, n, false);
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
  // Summed in rank order into the first device's buffer (one device holds
  // the sum already), then copied to the others where `to_all`: chunk by
  // chunk, each chunk's sum made and copied while it is in cache, the
  // chunks on every core. Each element's additions are in rank order
  // whatever the chunking, so the sums are the same bits.
  Status sum(const std::vector<float *> &local, int64_t n, bool to_all) {
    if (static_cast<int>(local.size()) != devices_)
      return Error("allreduce: " + std::to_string(local.size()) + " buffers for " +
                   std::to_string(devices_) + " devices");
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    auto reduce = [&](int64_t c, int) {
      const int64_t first = c * kChunk, count = std::min(kChunk, n - first);
      float *sum = local[0] + first;
      for (size_t r = 1; r < local.size(); ++r)
        addInto(sum, local[r] + first, count);
      for (size_t r = 1; to_all && r < local.size(); ++r)
        std::memcpy(local[r] + first, sum, static_cast<size_t>(count) * sizeof(float));
    };
    if (chunks > 1)
      ThreadPool::shared().parallelFor(chunks, reduce); // the host's cores, as the executors'
    else if (chunks == 1)
      reduce(0, 0);
    return Status::ok();
  }

  static constexpr int64_t kChunk = 16384; // floats: 64 KiB, a chunk of every rank in L2

  // sum[i] += x[i]: a whole chunk in a loop of known length the compiler
  // vectorises, the rest element by element.
  static void addInto(float *__restrict sum, const float *__restrict x, int64_t count) {
    if (count == kChunk) {
      for (int64_t i = 0; i < kChunk; ++i)
        sum[i] += x[i];
      return;
    }
    for (int64_t i = 0; i < count; ++i)
      sum[i] += x[i];
  }

  int devices_;
};

} // namespace

std::unique_ptr<Communicator> makeInProcessCommunicator(int devices) {
  return std::make_unique<InProcessCommunicator>(devices);
}

} // namespace kiln::runtime
