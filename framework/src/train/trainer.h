// The trainer: epochs of optimizer steps over the training set, an evaluation after each
// epoch, callbacks at fixed points. The step follows the precision contract of
// mixt/precision.h and knows no policy by name; checkpoints are the Checkpointer's, the
// other processes of a data-parallel run the Coordinator's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "assembly/components.h"
#include "assembly/named_callback.h"
#include "assembly/trainer_options.h"
#include "checkpoint/checkpointer.h"
#include "common/coordinator.h"
#include "common/run_directory.h"
#include "mixt/callback.h"
#include "mixt/train_state.h"
#include "train/progress.h"
#include "train/run_log.h"
#include "train/step_ledger.h"
#include "train/stop_control.h"

namespace mixt {

struct TrainResult {
  std::optional<Evaluation> final_eval;
  double train_seconds = 0;    // in the training loops only (what samples/s is measured over)
  double elapsed_seconds = 0;  // the whole fit: training, evaluation, checkpoints
  std::int64_t optimizer_steps = 0;  // attempted, including skipped ones
  std::int64_t skipped_steps = 0;    // skipped by the precision policy (inf/NaN gradients)
  std::int64_t samples = 0;
  std::int64_t bad_samples = 0;      // skipped by the data loaders (undecodable files), train and val
  std::optional<StopRequest> stopped_early;  // a callback's stop request ended the run (all ranks alike)
};

class Trainer {
 public:
  // `run` may be null (no outputs are written, e.g. in tests, `mixt check`, or on the
  // ranks other than 0). `coordinator` is null for a single process; a data-parallel run
  // passes its distributed::DataParallel.
  Trainer(Components& components, TrainerOptions options, RunDirectory* run, Progress& progress,
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
  // The model's current weights on `dataset` (train/evaluation.cpp); no callback is called.
  // `confusion`, when given, receives the [classes, classes] confusion matrix (int64, on the
  // CPU, summed over ranks; train/confusion_matrix.h).
  Evaluation evaluate(Dataset& dataset, at::Tensor* confusion = nullptr);
  void save_checkpoint(const std::filesystem::path& file, const std::vector<std::int64_t>& data_positions = {}) {
    checkpointer_.save(file, data_positions);
  }

 private:
  // Whether a callback's stop request ended the epoch after a step, before its last.
  bool train_epoch(TrainResult& result);
  at::Tensor forward_loss(const at::Tensor& inputs, const at::Tensor& targets, std::int64_t step);
  // Starts the epoch of the training data where the run stands (mid-epoch after a resume).
  void start_data(Dataset& data);
  // Every rank's data position, rank r's at [r]; a collective in data-parallel runs.
  std::vector<std::int64_t> data_positions() const;
  at::Tensor to_device(const at::Tensor& inputs) const;  // + channels_last when asked, + the policy's cast
  std::int64_t steps_per_epoch() const;
  // evaluate() between the callbacks' on_evaluation_start and _end: the model's own weights
  // (`weights` empty) or those a callback swaps in (its evaluated_weights()).
  Evaluation evaluate_with_callbacks(Dataset& dataset, const std::string& weights);
  // The callbacks' evaluated_weights(), evaluated after the model's own (e.g. "ema").
  std::vector<std::string> other_weights() const;
  template <typename Call>
  void notify(const char* method, const Call& call) {
    for (const NamedCallback& c : callbacks_) {
      stops_.calling(c.name);  // a stop request is the callback's
      c.guarded(method, [&] { call(*c.callback); });
    }
  }

  // trainer_stops.cpp: the one place that decides whether and how the run stops, agreed by
  // every rank. `go_on`; `end_run`, a callback's request (a normal end: checkpoint, final
  // evaluation, exit 0); `interrupt`, a signal (the checkpoint, exit 130). A non-finite
  // loss is a failure (exit 1), thrown from here.
  enum class Stop { go_on, end_run, interrupt };
  // After each step's callbacks; `loss_read`: the loss is on the host already (checked for inf/NaN then).
  Stop decide_after_step(bool loss_read);
  // At an epoch's end, after its checkpoint, evaluation and on_epoch_end.
  Stop decide_at_epoch_end();
  // The stop request every rank reports: the lowest rank's of those that asked (`after_step` only: of those).
  void agree_on_request(bool after_step);
  // The epoch's checkpoint: checkpoints/epoch-NNNN, or, for a run a request ends mid-epoch,
  // checkpoints/interrupted; empty when this process writes none.
  std::filesystem::path save_epoch_checkpoint(bool mid_epoch);
  // The callbacks' state after the evaluation and on_epoch_end, into that checkpoint.
  void update_callback_state(const std::filesystem::path& checkpoint);
  // Says that a callback's request ended the run (terminal, log.txt, metrics.jsonl).
  void report_early_end(TrainResult& result, bool mid_epoch);
  // A signal mid-epoch (agreed by every rank): the `interrupted` checkpoint, exit 130.
  [[noreturn]] void stop_mid_epoch(std::int64_t step);
  [[noreturn]] void stop_at_epoch_end(bool evaluation_skipped);
  // `failure` (a runtime error mid-epoch), after saving the epoch's completed steps as
  // checkpoints/interrupted when the weights are still good; its hint then says so.
  Error with_progress_saved(const Error& failure);

  // trainer_checks.cpp: what stops a run whose weights went bad before a checkpoint
  // holds them, and what is worth a warning.
  bool weights_finite() const;
  // Throws when an applied step's loss was inf or NaN (trainer.stop_on_nonfinite_loss).
  void check_loss_finite();
  // Throws when the weights themselves hold inf or NaN (a step applied with non-finite
  // gradients leaves every loss finite): once per epoch and before an interrupt's checkpoint.
  void check_weights_finite() const;
  // A warning (terminal, log.txt, metrics.jsonl) when the policy skipped more than half of
  // an epoch's steps, or when the validation loss is inf/NaN: a run that did not train, or
  // whose model overflows in its precision, must not read as "done".
  void warn_if_most_steps_were_skipped(std::int64_t steps, std::int64_t skipped);
  void warn_if_validation_is_not_finite(const Evaluation& evaluation);
  // "the newest checkpoint (...) is from before it", or why there is none.
  std::string newest_good_checkpoint(const std::string& before_what) const;

  Components& components_;
  TrainerOptions options_;
  RunDirectory* run_;
  Progress& progress_;
  SingleProcess single_process_;
  Coordinator& coordinator_;
  TrainState state_;
  // The skipped steps (into state_.skipped_steps) and the loss watch, on the device between reads.
  StepLedger ledger_{state_.skipped_steps};
  Checkpointer checkpointer_;
  std::shared_ptr<RunLog> run_log_;
  std::vector<NamedCallback> callbacks_;  // the run log, the recipe's, the caller's

  // Micro-batches of state_.epoch whose optimizer step is in the weights: what a failure
  // saves. Behind state_.batches_in_epoch while a step is under way.
  std::int64_t batches_in_weights_ = 0;
  // From the checkpoint resumed: each rank's data position in state_.epoch (empty when the
  // dataset cannot start part-way); used once, by start_data.
  std::vector<std::int64_t> resume_data_positions_;
  std::filesystem::path resumed_from_;   // the checkpoint resume() read, if any
  StopControl stops_;                    // the callbacks' stop requests (StepEnd::control, EpochEnd::control)
};

}  // namespace mixt
