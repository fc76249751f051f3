// How a training process reaches the others: the replicas' communicator and,
// when a replica's pipeline stages are spread over processes, its link.
// OpenMPI's under mpirun or with --devices-per-process, else the process's
// own (one process drives every device).
#pragma once

#include <memory>

#include "compiler/parallel/parallel_config.h"
#include "runtime/communicator.h"
#include "support/error.h"

namespace kiln::session {

struct Communicators {
  std::unique_ptr<runtime::Communicator> replicas;
  std::unique_ptr<runtime::StageLink> stages; // null: each process holds whole replicas

  // This process's index among the job's processes; process 0 speaks for
  // the job (prints, logs, traces, writes checkpoints).
  int process() const;
};

// The communicators of a job of `devices` on `layout`, this process
// driving `devices_per_process` of them (0: all, unless launched by
// mpirun). A process holds whole replicas, or (with pipeline stages) a
// whole number of one replica's stages; a tensor-parallel group stays in
// one process, its collectives running between kernels in lockstep.
Expected<Communicators> communicatorsFor(int devices, int devices_per_process,
                                         const parallel::ParallelConfig &layout);

} // namespace kiln::session
