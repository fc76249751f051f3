#include "session/communicators.h"

#include <string>

#include "runtime/mpi_communicator.h"

namespace kiln::session {

int Communicators::process() const {
  return stages ? replicas->firstLocalRank() * stages->processes() + stages->index()
                : replicas->firstLocalRank();
}

Expected<Communicators> communicatorsFor(int devices, int devices_per_process,
                                         const parallel::ParallelConfig &layout) {
  const int per_process = devices_per_process > 0 ? devices_per_process : devices;
  if (devices_per_process == 0 && !runtime::launchedByMpi())
    return Communicators{runtime::makeInProcessCommunicator(layout.dp), nullptr};
  const int per_replica = layout.devicesPerReplica();
  if (per_process % per_replica == 0) {
    KILN_ASSIGN_OR_RETURN(auto mpi,
                          runtime::makeMpiCommunicator(layout.dp, per_process / per_replica));
    return Communicators{std::move(mpi), nullptr};
  }
  if (layout.pp == 1 || per_process % layout.tp != 0 || per_replica % per_process != 0)
    return Error("--devices-per-process " + std::to_string(per_process) +
                 (layout.pp == 1
                      ? " must hold whole tensor-parallel groups: make it a multiple of --tp " +
                            std::to_string(layout.tp)
                      : " must hold whole tensor-parallel groups and whole replicas or a "
                        "whole number of one replica's pipeline stages: make it a multiple "
                        "of --tp x --pp = " +
                            std::to_string(per_replica) + ", or --tp x a divisor of --pp"));
  KILN_ASSIGN_OR_RETURN(runtime::MpiPipeline mpi,
                        runtime::makeMpiPipeline(layout.dp, per_replica / per_process));
  return Communicators{std::move(mpi.replicas), std::move(mpi.stages)};
}

} // namespace kiln::session
