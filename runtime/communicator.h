// Collectives across the data-parallel replicas of a job. One process
// drives its local devices and hands the communicator one buffer per local
// device; the reduction adds every replica's buffer in rank order, so a sum
// is bit-identical however the replicas are spread over processes (one
// process of 8 devices, or 2 processes of 4 under MPI).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ir/error.h"

namespace kiln::runtime {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int worldSize() const = 0;      // replicas in the whole job
  virtual int firstLocalRank() const = 0; // the rank of this process's first device
  virtual int localSize() const = 0;      // devices of this process

  // Each local buffer (n floats) becomes the sum of all replicas' buffers.
  virtual Status allReduceSum(const std::vector<float *> &local, int64_t n) = 0;
  // Each local buffer (bytes long) becomes replica `root`'s.
  virtual Status broadcast(const std::vector<void *> &local, int64_t bytes, int root) = 0;
};

// The devices of one process: reductions are loops over their buffers.
std::unique_ptr<Communicator> makeInProcessCommunicator(int devices);

} // namespace kiln::runtime
