// The data-parallel facade the experiment and the trainer use: it creates the process
// group from torchrun's environment and the recipe's trainer.distributed section, and
// offers the handful of synchronisation points a data-parallel step needs, as the
// trainer's Coordinator (a single-process run has SingleProcess instead).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/nn/module.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/environment.h"
#include "distributed/gradient_buckets.h"
#include "distributed/options.h"
#include "distributed/process_group.h"
#include "common/coordinator.h"

namespace mixt::distributed {

class DataParallel final : public Coordinator {
 public:
  // Connects to the store, creates the backend (`auto`: NCCL for a CUDA device, else
  // Gloo) and returns once every rank has joined.
  DataParallel(const LaunchEnvironment& environment, const DistributedOptions& options, at::Device device);

  const LaunchEnvironment& environment() const { return environment_; }
  const ProcessGroupCommunicator& communicator() const { return *communicator_; }
  int rank() const override { return environment_.rank; }
  int world_size() const override { return environment_.world_size; }
  bool is_main() const { return environment_.rank == 0; }
  // Which attempt of the job this is (1-based), the same on every rank: 1 outside
  // torchelastic. Whether to continue an earlier attempt's run is decided on this, never on
  // the node's own TORCHELASTIC_RESTART_COUNT (distributed/attempt.h says why).
  std::int64_t attempt() const { return attempt_; }
  const std::string& backend_name() const { return communicator_->backend_name(); }

  // Every rank must run the same mixt build and the same resolved recipe: compares a hash
  // of each across ranks and throws (exit 2) on every rank when they differ.
  void check_same_recipe(const std::string& text) const;
  // Whether every rank passed the same `text` (a hash compared with one all-reduce).
  bool all_ranks_agree(const std::string& text) const;

  // Parameters and buffers from rank 0 to every other rank.
  void broadcast_model(torch::nn::Module& model) const override;
  // Prepares the gradient buckets for these parameters (once, before training).
  void set_parameters(const std::vector<at::Tensor>& parameters);
  // Before each backward: `last` for the optimizer step's last micro-batch, whose backward
  // starts bucket all-reduces from gradient hooks (trainer.distributed.overlap).
  void prepare_backward(bool last) override;
  // Averages the gradients over ranks (bucketed all-reduce); after the last backward.
  void average_gradients() override;
  // One small all-reduce per step: the mean loss over ranks (read from the device). The
  // stop votes are a second one, after the step's callbacks (a callback may ask to stop).
  StepAgreement agree_on_step(const at::Tensor& loss) const override;

  // Sums small per-rank numbers (a loss, a sample count, an interrupt flag) over ranks.
  std::vector<double> sum(const std::vector<double>& values) const override;
  void barrier() const override { communicator_->barrier(); }
  // Throws a runtime error when the parameters are not bit-identical on every rank (a rank
  // that skipped a step the others applied, a non-deterministic op).
  void check_in_sync(torch::nn::Module& model, const std::string& when, const std::string& hint = {}) const override;
  // An evaluation ends in a collective: every rank finishes it.
  bool may_stop_alone() const override { return false; }

  // A value every attempt of a torchelastic job reads (the job's run directory), kept in
  // the elastic agent's store, which lives as long as the job. False when there is no such
  // store (no agent store): the caller has to fall back on something else.
  bool has_job_store() const { return job_store_ != nullptr; }
  std::optional<std::string> job_value(const std::string& key) const;
  void set_job_value(const std::string& key, const std::string& value) const;

 private:
  // The largest `value` of any rank.
  double highest(double value) const;
  // Where this rank's resolved recipe first differs from rank 0's ("" on rank 0).
  std::string difference_from_rank_0(const std::string& text) const;

  LaunchEnvironment environment_;
  DistributedOptions options_;
  at::Device device_;
  std::unique_ptr<ProcessGroupCommunicator> communicator_;
  c10::intrusive_ptr<c10d::Store> job_store_;
  c10::intrusive_ptr<c10d::Store> store_;  // this attempt's, which every rank reaches
  std::optional<GradientBuckets> buckets_;
  std::int64_t attempt_ = 1;
};

}  // namespace mixt::distributed
