// Collectives across processes with MPI (OpenMPI from Debian), for jobs that
// launch one kiln per host or per device group:
//
//   mpirun -np 2 kiln train ... --devices 8 --devices-per-process 4
//
// Each process drives `devices_per_process` replicas; process p holds ranks
// [p * L, (p + 1) * L). A sum gathers every replica's buffer and adds them in
// rank order, so the result is bit-identical to one process driving all of
// them (communicator.h). Available when kiln is built with MPI.
#pragma once

#include <memory>

#include "runtime/communicator.h"

namespace kiln::runtime {

// True when this process was started by an MPI launcher (mpirun sets the
// environment) and kiln was built with MPI.
bool launchedByMpi();
bool builtWithMpi();

// Initialises MPI (finalised at exit) and checks that processes x
// `replicas_per_process` is `replicas` (the job's data-parallel replicas).
Expected<std::unique_ptr<Communicator>> makeMpiCommunicator(int replicas, int replicas_per_process);

// A replica's pipeline over `processes_per_replica` processes (each holds
// some of its stages; process p is replica p / K's k = p % K): the
// communicator of the processes holding the same stages of every replica
// (one replica each) and this replica's StageLink.
struct MpiPipeline {
  std::unique_ptr<Communicator> replicas;
  std::unique_ptr<StageLink> stages;
};
Expected<MpiPipeline> makeMpiPipeline(int replicas, int processes_per_replica);

// Ends every process of the MPI job (MPI_Abort) with `exit_code`, so that
// an error in one process does not leave the others waiting in their next
// collective. Does nothing unless this process initialised MPI.
void abortMpiJob(int exit_code);

} // namespace kiln::runtime
