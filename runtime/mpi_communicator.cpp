#include "runtime/mpi_communicator.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifdef KILN_HAVE_MPI
#include <mpi.h>
#endif

namespace kiln::runtime {

bool launchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

#ifdef KILN_HAVE_MPI

bool builtWithMpi() { return true; }

namespace {

Status mpiStatus(int code, const char *what) {
  if (code == MPI_SUCCESS)
    return Status::ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return Error(std::string("MPI ") + what + " failed: " + std::string(text, length));
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int processes, int process, int local) : processes_(processes), local_(local) {
    first_ = process * local;
  }
  int worldSize() const override { return processes_ * local_; }
  int firstLocalRank() const override { return first_; }
  int localSize() const override { return local_; }

  Status allReduceSum(const std::vector<float *> &local, int64_t n) override {
    if (static_cast<int>(local.size()) != local_)
      return Error("allreduce: " + std::to_string(local.size()) + " buffers for " +
                   std::to_string(local_) + " local devices");
    const size_t count = static_cast<size_t>(n);
    if (n * worldSize() > INT32_MAX)
      return Error("allreduce of " + std::to_string(n) + " values over " +
                   std::to_string(worldSize()) + " replicas is past MPI's int counts");
    send_.resize(count * local_);
    for (int d = 0; d < local_; ++d)
      std::memcpy(send_.data() + d * count, local[d], count * sizeof(float));
    all_.resize(count * worldSize());
    KILN_RETURN_IF_ERROR(mpiStatus(
        MPI_Allgather(send_.data(), static_cast<int>(send_.size()), MPI_FLOAT, all_.data(),
                      static_cast<int>(send_.size()), MPI_FLOAT, MPI_COMM_WORLD),
        "allgather"));
    sum_.assign(count, 0.0f);
    for (int r = 0; r < worldSize(); ++r) // rank order, as in one process
      for (size_t i = 0; i < count; ++i)
        sum_[i] += all_[r * count + i];
    for (float *buffer : local)
      std::memcpy(buffer, sum_.data(), count * sizeof(float));
    return Status::ok();
  }

  Status broadcast(const std::vector<void *> &local, int64_t bytes, int root) override {
    const int owner = root / local_;
    void *source = owner * local_ == first_ ? local[root - first_] : local[0];
    KILN_RETURN_IF_ERROR(mpiStatus(
        MPI_Bcast(source, static_cast<int>(bytes), MPI_BYTE, owner, MPI_COMM_WORLD), "broadcast"));
    for (void *buffer : local)
      if (buffer != source)
        std::memcpy(buffer, source, static_cast<size_t>(bytes));
    return Status::ok();
  }

private:
  int processes_, local_, first_ = 0;
  std::vector<float> send_, all_, sum_;
};

} // namespace

Expected<std::unique_ptr<Communicator>> makeMpiCommunicator(int replicas,
                                                            int replicas_per_process) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    KILN_RETURN_IF_ERROR(mpiStatus(MPI_Init(nullptr, nullptr), "init"));
    std::atexit([] { MPI_Finalize(); });
  }
  int processes = 0, process = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  if (processes * replicas_per_process != replicas)
    return Error(std::to_string(processes) + " MPI processes x " +
                 std::to_string(replicas_per_process) +
                 " replicas each (--devices-per-process / --tp) is not the job's " +
                 std::to_string(replicas) + " replicas (--devices / --tp)");
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(processes, process, replicas_per_process));
}

void abortMpiJob(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, exit_code);
}

#else

bool builtWithMpi() { return false; }

void abortMpiJob(int) {}

Expected<std::unique_ptr<Communicator>> makeMpiCommunicator(int, int) {
  return Error("this kiln was built without MPI (install libopenmpi-dev and rebuild) and cannot "
               "train across processes");
}

#endif

} // namespace kiln::runtime
