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

Status initMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    KILN_RETURN_IF_ERROR(mpiStatus(MPI_Init(nullptr, nullptr), "init"));
    std::atexit([] { MPI_Finalize(); });
  }
  return Status::ok();
}

Status checkCount(int64_t bytes, const char *what) {
  if (bytes > INT32_MAX)
    return Error(std::string(what) + " of " + std::to_string(bytes) +
                 " bytes is past MPI's int counts");
  return Status::ok();
}

// The replicas of the processes in `comm`, `local` per process.
class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(MPI_Comm comm, int local) : comm_(comm), local_(local) {
    int process = 0;
    MPI_Comm_size(comm, &processes_);
    MPI_Comm_rank(comm, &process);
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
    KILN_RETURN_IF_ERROR(
        mpiStatus(MPI_Allgather(send_.data(), static_cast<int>(send_.size()), MPI_FLOAT,
                                all_.data(), static_cast<int>(send_.size()), MPI_FLOAT, comm_),
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
    KILN_RETURN_IF_ERROR(checkCount(bytes, "broadcast"));
    KILN_RETURN_IF_ERROR(
        mpiStatus(MPI_Bcast(source, static_cast<int>(bytes), MPI_BYTE, owner, comm_), "broadcast"));
    for (void *buffer : local)
      if (buffer != source)
        std::memcpy(buffer, source, static_cast<size_t>(bytes));
    return Status::ok();
  }

private:
  MPI_Comm comm_;
  int processes_ = 1, local_, first_ = 0;
  std::vector<float> send_, all_, sum_;
};

class MpiStageLink final : public StageLink {
public:
  explicit MpiStageLink(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_size(comm, &processes_);
    MPI_Comm_rank(comm, &index_);
  }
  int processes() const override { return processes_; }
  int index() const override { return index_; }

  Status send(const void *data, int64_t bytes, int to, int tag) override {
    KILN_RETURN_IF_ERROR(checkCount(bytes, "a pipeline send"));
    sends_.emplace_back();
    return mpiStatus(
        MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, to, tag, comm_, &sends_.back()),
        "pipeline send");
  }
  Status receive(void *data, int64_t bytes, int from, int tag) override {
    KILN_RETURN_IF_ERROR(checkCount(bytes, "a pipeline receive"));
    return mpiStatus(
        MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, from, tag, comm_, MPI_STATUS_IGNORE),
        "pipeline receive");
  }
  Status finishSends() override {
    std::vector<MPI_Request> pending;
    pending.swap(sends_);
    return mpiStatus(
        MPI_Waitall(static_cast<int>(pending.size()), pending.data(), MPI_STATUSES_IGNORE),
        "pipeline sends");
  }
  Status sum(std::vector<double> &values) override {
    const size_t n = values.size();
    std::vector<double> all(n * static_cast<size_t>(processes_));
    KILN_RETURN_IF_ERROR(checkCount(static_cast<int64_t>(all.size() * sizeof(double)), "a sum"));
    KILN_RETURN_IF_ERROR(
        mpiStatus(MPI_Allgather(values.data(), static_cast<int>(n), MPI_DOUBLE, all.data(),
                                static_cast<int>(n), MPI_DOUBLE, comm_),
                  "pipeline sum"));
    for (size_t i = 0; i < n; ++i) {
      values[i] = 0;
      for (int p = 0; p < processes_; ++p) // in the processes' order, every time
        values[i] += all[static_cast<size_t>(p) * n + i];
    }
    return Status::ok();
  }
  Status broadcast(void *data, int64_t bytes, int root) override {
    KILN_RETURN_IF_ERROR(checkCount(bytes, "a pipeline broadcast"));
    return mpiStatus(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_),
                     "pipeline broadcast");
  }

private:
  MPI_Comm comm_;
  int processes_ = 1, index_ = 0;
  std::vector<MPI_Request> sends_;
};

} // namespace

Expected<std::unique_ptr<Communicator>> makeMpiCommunicator(int replicas,
                                                            int replicas_per_process) {
  KILN_RETURN_IF_ERROR(initMpi());
  int processes = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  if (processes * replicas_per_process != replicas)
    return Error(std::to_string(processes) + " MPI processes x " +
                 std::to_string(replicas_per_process) +
                 " replicas each (--devices-per-process / --tp) is not the job's " +
                 std::to_string(replicas) + " replicas (--devices / --tp)");
  return std::unique_ptr<Communicator>(new MpiCommunicator(MPI_COMM_WORLD, replicas_per_process));
}

Expected<MpiPipeline> makeMpiPipeline(int replicas, int processes_per_replica) {
  KILN_RETURN_IF_ERROR(initMpi());
  int processes = 0, process = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  if (processes != replicas * processes_per_replica)
    return Error(std::to_string(processes) + " MPI processes are not the job's " +
                 std::to_string(replicas) + " replicas x " + std::to_string(processes_per_replica) +
                 " processes each (--tp x --pp / --devices-per-process)");
  MPI_Comm same_stages = MPI_COMM_NULL, same_replica = MPI_COMM_NULL;
  const int replica = process / processes_per_replica, k = process % processes_per_replica;
  KILN_RETURN_IF_ERROR(
      mpiStatus(MPI_Comm_split(MPI_COMM_WORLD, k, replica, &same_stages), "split"));
  KILN_RETURN_IF_ERROR(
      mpiStatus(MPI_Comm_split(MPI_COMM_WORLD, replica, k, &same_replica), "split"));
  MpiPipeline out;
  out.replicas = std::make_unique<MpiCommunicator>(same_stages, 1);
  out.stages = std::make_unique<MpiStageLink>(same_replica);
  return out;
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

Expected<MpiPipeline> makeMpiPipeline(int, int) {
  return Error("this kiln was built without MPI (install libopenmpi-dev and rebuild) and cannot "
               "train across processes");
}

#endif

} // namespace kiln::runtime
