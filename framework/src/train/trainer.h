// The trainer: epochs of optimizer steps over the training set, an evaluation after each
// epoch, callbacks at fixed points. The loop is all it owns: the step follows the precision
// contract of mixt/precision.h and knows no policy by name, and the rest is its
// collaborators' (train/): the loss (TrainingLoss), where the data stands (DataCursor),
// whether to stop (StopDecider), the checkpoints that keep work when a run stops early
// (RecoveryCheckpoints), the evaluation (Evaluator), what is shown and logged (RunLog), the
// checkpoints themselves (Checkpointer) and the other processes (Coordinator).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "assembly/components.h"
#include "assembly/named_callback.h"
#include "assembly/run_facts.h"
#include "assembly/trainer_options.h"
#include "checkpoint/checkpointer.h"
#include "common/coordinator.h"
#include "common/run_directory.h"
#include "mixt/callback.h"
#include "mixt/train_state.h"
#include "train/data_cursor.h"
#include "train/evaluator.h"
#include "train/progress.h"
#include "train/recovery_checkpoints.h"
#include "train/run_log.h"
#include "train/step_ledger.h"
#include "train/stop_decider.h"
#include "train/training_loss.h"

namespace mixt {

struct TrainResult {
  std::optional<Evaluation> final_eval;
  double train_seconds = 0;          // in the training loops only (what samples/s is measured over)
  double elapsed_seconds = 0;        // the whole fit: training, evaluation, checkpoints
  std::int64_t optimizer_steps = 0;  // attempted, including skipped ones
  std::int64_t skipped_steps = 0;    // skipped by the precision policy (inf/NaN gradients)
  std::int64_t samples = 0;
  std::optional<Throughput> throughput;      // the task's predictions per sample, when it counts several
  std::int64_t bad_samples = 0;              // skipped by the data loaders (undecodable files), train and val
  std::optional<StopRequest> stopped_early;  // a callback's stop request ended the run (all ranks alike)
};

class Trainer {
 public:
  // `run` may be null (no outputs are written, e.g. in tests, `mixt check`, or on the
  // ranks other than 0). `coordinator` is null for a single process; a data-parallel run
  // passes its distributed::DataParallel.
  Trainer(Components& components, const RunFacts& facts, TrainerOptions options, RunDirectory* run, Progress& progress,
          Coordinator* coordinator = nullptr);

  // Continues from a checkpoint written by a run of the same recipe (Checkpointer::resume).
  void resume(const std::filesystem::path& checkpoint, bool check_data_order = true);
  // Where outputs go from now on (null: nowhere).
  void write_to(RunDirectory* run);
  // A callback of the caller's (after the built-in progress log and the recipe's).
  void add_callback(std::shared_ptr<Callback> callback, std::string name);
  TrainResult fit();
  // Every epoch of trainer.epochs is done (after resuming a finished run).
  bool finished() const { return state_.epoch >= options_.epochs; }
  const TrainState& state() const { return state_; }
  void save_checkpoint(const std::filesystem::path& file, const std::vector<std::int64_t>& data_positions = {}) {
    checkpointer_.save(file, data_positions);
  }

 private:
  // Where an epoch's loop stands.
  struct EpochRun {
    std::int64_t step = 0;     // optimizer steps of the epoch done
    std::int64_t steps = 0;    // it will have
    std::int64_t samples = 0;  // this process's samples so far
    bool data_left = true;     // data.train has not run out
    std::chrono::steady_clock::time_point started;
  };
  // Whether a callback's stop request ended the epoch after a step, before its last.
  bool train_epoch(TrainResult& result);
  // One optimizer step, then its callbacks: whether the run goes on, or nothing when the
  // data ran out before the step's first micro-batch.
  std::optional<StopDecider::Stop> train_step(EpochRun& epoch, TrainResult& result);
  at::Tensor forward_and_backward(EpochRun& epoch);
  at::Tensor measure_and_clip(bool logged);
  StopDecider::Stop after_step(EpochRun& epoch, TrainResult& result, const StepOutcome& applied, const at::Tensor& loss,
                               const at::Tensor& grad_norm, bool logged);
  // A sharded run, on every rank before rank 0 writes a checkpoint (rank 0 hands its path
  // round): each rank writes its optimizer shard beside it, before that file exists to name
  // them, and the callbacks that gather their state from chunks (mixt/weight_shards.h) do.
  void save_ranks_parts(const std::filesystem::path& rank_0_file);
  [[noreturn]] void nothing_trained(Dataset& data, std::int64_t bad_at_start) const;
  std::int64_t steps_per_epoch() const;

  // trainer_epoch_end.cpp: the epoch's checkpoint, evaluations, on_epoch_end and stop decision.
  StopDecider::Stop end_epoch(TrainResult& result, bool mid_epoch, std::int64_t bad_before,
                              std::chrono::steady_clock::time_point fit_started);
  struct EpochEvaluations {
    std::optional<Evaluation> own;   // the model's own weights; none without data.val
    std::vector<Evaluation> others;  // the callbacks' weights (Callback::evaluated_weights)
  };
  EpochEvaluations evaluate_epoch();
  // Between the callbacks' evaluation hooks: the model's own weights (`weights` empty) or
  // those a callback swaps in (its evaluated_weights()).
  Evaluation evaluate_with_callbacks(Dataset& dataset, const std::string& weights);
  // The callbacks' evaluated_weights(), evaluated after the model's own (e.g. "ema").
  std::vector<std::string> other_weights() const;
  // Says that a callback's request ended the run (terminal, log.txt, metrics.jsonl).
  void report_early_end(TrainResult& result, bool mid_epoch);
  template <typename Call>
  void notify(const char* method, const Call& call) {
    for (const NamedCallback& c : callbacks_) {
      stops_.calling(c.name);  // a stop request is the callback's
      c.guarded(method, [&] { call(*c.callback); });
    }
  }
  // A signal: the checkpoint that keeps the run, the callbacks' on_interrupt, exit 130.
  [[noreturn]] void stop_mid_epoch(std::int64_t step);
  [[noreturn]] void stop_at_epoch_end(bool evaluation_skipped);

  Components& components_;
  const RunFacts& facts_;
  TrainerOptions options_;
  SingleProcess single_process_;
  Coordinator& coordinator_;
  TrainState state_;
  // The skipped steps (into state_.skipped_steps) and the loss watch, on the device between reads.
  StepLedger ledger_{state_.skipped_steps};
  Checkpointer checkpointer_;
  RecoveryCheckpoints recovery_;
  StopDecider stops_;
  DataCursor data_;
  TrainingLoss loss_;
  Evaluator evaluator_;
  std::shared_ptr<RunLog> run_log_;
  std::vector<NamedCallback> callbacks_;  // the run log, the recipe's, the caller's
  // trainer.grad_norm: every_step, or a callback reads_grad_norm_every_step(): decided once.
  bool grad_norm_every_step_ = false;
  // Micro-batches of state_.epoch whose optimizer step is in the weights: what a failure
  // saves. Behind state_.batches_in_epoch while a step is under way.
  std::int64_t batches_in_weights_ = 0;
};

}  // namespace mixt
