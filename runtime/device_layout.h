// Where each device a training process drives sits in the job, in
// Megatron's order: local replica r's pipeline rank s's tensor-parallel
// rank t is local device (r * S + s - first) * T + t, where the process
// holds S pipeline ranks from `first` (all P of them unless its replica's
// pipeline is spread over processes); the job numbers its devices
// (replica * P + s) * T + t. Every index into the trainer's per-device
// state goes through here.
#pragma once

namespace kiln::runtime {

class DeviceLayout {
public:
  // `tp` ranks per pipeline rank, `pp` pipeline ranks per replica; the
  // process drives `local_replicas` replicas from `first_replica`, and of
  // each the pipeline ranks its place `index` among `processes` processes
  // holds (1 and 0: all of them).
  DeviceLayout(int tp, int pp, int first_replica, int local_replicas, int processes = 1,
               int index = 0)
      : tp_(tp), pp_(pp), first_replica_(first_replica), local_replicas_(local_replicas),
        local_stages_(pp / processes), first_stage_(index * local_stages_) {}

  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int devices() const { return local_replicas_ * local_stages_ * tp_; } // this process's
  int firstStage() const { return first_stage_; }
  int localStages() const { return local_stages_; }

  int deviceOf(int local_replica, int stage, int tp_rank) const {
    return (local_replica * local_stages_ + stage - first_stage_) * tp_ + tp_rank;
  }
  int tpRankOf(int device) const { return device % tp_; }
  int stageOf(int device) const { return first_stage_ + device / tp_ % local_stages_; }
  int replicaOf(int device) const { return first_replica_ + device / (tp_ * local_stages_); }
  // The job's number of local device `device`.
  int globalDevice(int device) const {
    return (replicaOf(device) * pp_ + stageOf(device)) * tp_ + tpRankOf(device);
  }
  bool holdsStage(int stage) const {
    return stage >= first_stage_ && stage < first_stage_ + local_stages_;
  }
  // The process of this replica's pipeline that holds pipeline rank `stage`.
  int processOfStage(int stage) const { return stage / local_stages_; }

private:
  int tp_, pp_, first_replica_, local_replicas_, local_stages_, first_stage_;
};

} // namespace kiln::runtime
