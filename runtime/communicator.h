// Collectives across the data-parallel replicas of a job. One process
// drives its local devices and hands the communicator one buffer per local
// device; the reduction adds every replica's buffer in rank order, so a sum
// is bit-identical however the replicas are spread over processes (one
// process of 8 devices, or 2 processes of 4 under MPI).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "support/error.h"

namespace kiln::runtime {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int worldSize() const = 0;      // replicas in the whole job
  virtual int firstLocalRank() const = 0; // the rank of this process's first device
  virtual int localSize() const = 0;      // devices of this process

  // Each local buffer (n floats) becomes the sum of all replicas' buffers.
  virtual Status allReduceSum(const std::vector<float *> &local, int64_t n) = 0;
  // The first local buffer becomes the sum of all replicas' buffers; the
  // others may be left as they were (their replicas read the first's
  // results). By default an allReduceSum.
  virtual Status reduceSumToFirst(const std::vector<float *> &local, int64_t n) {
    return allReduceSum(local, n);
  }
  // Each local buffer (bytes long) becomes replica `root`'s.
  virtual Status broadcast(const std::vector<void *> &local, int64_t bytes, int root) = 0;
};

// The processes one replica's pipeline stages are spread over, when a
// process holds fewer than all of them (MPI): process k of a replica's K
// holds stages [k P / K, (k + 1) P / K). The activations and gradients
// its stages hand each other, and the sums over them (the loss, the float
// status, the gradient norm's squares). Every process of the job has one,
// each replica's its own.
class StageLink {
public:
  virtual ~StageLink() = default;
  virtual int processes() const = 0; // the replica's processes, K
  virtual int index() const = 0;     // this one's place among them, k
  // Starts sending `bytes` at `data` to process `to` under `tag`; the
  // bytes must stay as they are until finishSends().
  virtual Status send(const void *data, int64_t bytes, int to, int tag) = 0;
  virtual Status receive(void *data, int64_t bytes, int from, int tag) = 0;
  virtual Status finishSends() = 0;
  // Each value becomes the sum over the replica's processes, in their order.
  virtual Status sum(std::vector<double> &values) = 0;
  // The `bytes` at `data` become process `root`'s.
  virtual Status broadcast(void *data, int64_t bytes, int root) = 0;
};

// The devices of one process: reductions are loops over their buffers.
std::unique_ptr<Communicator> makeInProcessCommunicator(int devices);

} // namespace kiln::runtime
