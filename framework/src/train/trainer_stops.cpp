// How the Trainer stops, decided in one place (decide_after_step, decide_at_epoch_end) and
// agreed by every rank: for a callback's request (a normal end: the checkpoint, the final
// evaluation, exit 0), for a signal (mid-epoch or at an epoch's end, with the checkpoint
// that makes `trainer.resume` lose nothing, exit 130), for a non-finite loss (exit 1), and
// on a failure mid-epoch (saving the epoch's completed steps when the weights are still good).
#include "train/trainer.h"

#include "common/interrupt.h"
#include "common/warnings.h"

namespace mixt {

namespace fs = std::filesystem;

// One small all-reduce in a data-parallel run (none in one process): a signal on any rank
// or a callback's after-step request on any rank stops every rank after this same step.
Trainer::Stop Trainer::decide_after_step(bool loss_read) {
  // Data parallel, the loss is every rank's mean: every rank throws here at the same step.
  if (loss_read) check_loss_finite();
  const std::vector<double> votes =
      coordinator_.sum({interrupt_requested() ? 1.0 : 0.0, stops_.after_step() ? 1.0 : 0.0});
  if (votes[0] > 0) return Stop::interrupt;
  if (votes[1] == 0) return Stop::go_on;
  agree_on_request(/*after_step=*/true);
  return Stop::end_run;
}

// A signal during the evaluation or the checkpoint: the epoch's checkpoint is written, so
// stopping here loses nothing, where going on would wait for one more training step.
Trainer::Stop Trainer::decide_at_epoch_end() {
  const std::vector<double> votes =
      coordinator_.sum({interrupt_requested() ? 1.0 : 0.0, stops_.stop_requested() ? 1.0 : 0.0});
  if (votes[0] > 0) return Stop::interrupt;
  if (votes[1] == 0) return Stop::go_on;
  agree_on_request(/*after_step=*/false);
  return Stop::end_run;
}

void Trainer::agree_on_request(bool after_step) {
  const bool mine = after_step ? stops_.after_step() : stops_.stop_requested();
  const std::vector<std::int64_t> asked = coordinator_.gather(mine ? 1 : 0);
  int from = 0;
  while (from + 1 < coordinator_.world_size() && asked[static_cast<std::size_t>(from)] == 0) ++from;
  std::string text;
  if (mine) {
    const StopRequest& own = *stops_.request();
    text = own.by + '\n' + (own.when == StopWhen::after_step ? "1" : "0") + own.reason;
  }
  const std::string shared = coordinator_.text_from(from, text);
  const auto newline = shared.find('\n');
  if (newline == std::string::npos) return;  // cannot happen: rank `from` asked
  stops_.agreed({shared.substr(0, newline), shared.substr(newline + 2),
                 shared.compare(newline + 1, 1, "1") == 0 ? StopWhen::after_step : StopWhen::after_evaluation});
}

fs::path Trainer::save_epoch_checkpoint(bool mid_epoch) {
  if (!mid_epoch) return run_ ? checkpointer_.save_epoch_end(*run_) : fs::path();
  const std::vector<std::int64_t> positions = data_positions();  // every rank takes part
  if (!run_) return {};
  const fs::path file = run_->checkpoints() / "interrupted";
  checkpointer_.save(file, positions);
  return file;
}

// The checkpoint is whole already; a rewrite that fails (a full disk) leaves it whole too.
void Trainer::update_callback_state(const fs::path& checkpoint) {
  if (checkpoint.empty()) return;
  try {
    checkpointer_.update_callback_state(checkpoint);
  } catch (const Error& e) {
    warn("the callbacks' state after epoch " + std::to_string(state_.epoch + 1) + "'s evaluation is not in " +
         checkpoint.string() + ", which keeps theirs from before it: " + e.message());
  }
}

void Trainer::report_early_end(TrainResult& result, bool mid_epoch) {
  const StopRequest& request = *stops_.request();
  result.stopped_early = request;
  const std::string epoch = std::to_string(state_.epoch + 1), step = std::to_string(state_.global_step);
  const std::string where = mid_epoch ? "in epoch " + epoch + ", after step " + step
                                      : "after epoch " + epoch + " of " + std::to_string(options_.epochs);
  const std::string line = "stopped early by " + request.by + ": " + request.reason + " (" + where + ")";
  progress_.note(line);
  if (!run_) return;
  run_->append_log(line);
  run_->append_metrics({{"event", "stop"},
                        {"by", request.by},
                        {"reason", request.reason},
                        {"when", stop_when_name(request.when)},
                        {"epoch", state_.epoch + 1},
                        {"step", state_.global_step}});
}

void Trainer::stop_mid_epoch(std::int64_t step) {
  check_loss_finite();  // never a checkpoint of inf/NaN weights
  check_weights_finite();
  // Every rank takes part. A rank lost since the stop was agreed must not cost rank 0 its
  // checkpoint: save without positions (a resume then replays those batches) and let the
  // barrier below report the failure.
  std::vector<std::int64_t> positions;
  try {
    positions = data_positions();
  } catch (const std::exception&) {  // positions stay empty
  }
  fs::path file;
  if (run_) {
    file = run_->checkpoints() / "interrupted";
    checkpointer_.save(file, positions);
    progress_.note("\ninterrupted: checkpoint written to " + file.string() +
                   " (continue with trainer.resume=" + run_->path().string() + ")");
    run_->append_log("interrupted after step " + std::to_string(step) + " of epoch " +
                     std::to_string(state_.epoch + 1) + " (global step " + std::to_string(state_.global_step) +
                     "): checkpoint " + file.string());
  }
  notify("on_interrupt", [&](Callback& callback) { callback.on_interrupt(state_, file); });
  coordinator_.barrier();
  throw Error(ErrorKind::interrupted, "interrupted");
}

void Trainer::stop_at_epoch_end(bool evaluation_skipped) {
  fs::path file;
  if (run_) {
    // A callback's stop mid-epoch saved the epoch's part as `interrupted` before its evaluation.
    file = run_->checkpoints() /
           (state_.batches_in_epoch > 0 ? std::string("interrupted") : epoch_checkpoint_name(state_.epoch + 1));
    const std::string during = evaluation_skipped ? " during the evaluation" : "";
    const std::string after = " after epoch " + std::to_string(state_.epoch + 1);
    progress_.note("\ninterrupted" + during + after + ": its checkpoint is " + file.string() +
                   " (continue with trainer.resume=" + run_->path().string() + ")");
    run_->append_log("interrupted" + during + after + ": checkpoint " + file.string());
  }
  notify("on_interrupt", [&](Callback& callback) { callback.on_interrupt(state_, file); });
  throw Error(ErrorKind::interrupted, "interrupted");
}

// A runtime failure mid-epoch (a bad file under on_bad_sample: fail, a batch the model
// cannot take, a callback that throws, a rank lost) need not cost the epoch's steps: the
// weights are those of the last completed step, so they are saved as `interrupted`, which
// resuming the run directory continues from (the failed step's micro-batches are trained
// again). Data parallel: rank 0's weights are the run's whichever rank failed, since no
// step is applied without the gradient all-reduce of every rank. Not when the weights are
// broken (a non-finite loss or parameter: in a data-parallel run the last step's mean loss
// may not be known), when nothing of the epoch is done, or when the checkpoint cannot be
// written either (a full disk).
Error Trainer::with_progress_saved(const Error& failure) {
  if (failure.kind() != ErrorKind::runtime || !run_ || batches_in_weights_ == 0) return failure;
  if (ledger_.first_nonfinite_loss_step() || !weights_finite()) return failure;
  const std::int64_t steps = batches_in_weights_ / options_.accumulate;
  state_.batches_in_epoch = batches_in_weights_;
  const fs::path file = run_->checkpoints() / "interrupted";
  try {
    checkpointer_.save(file);  // no data positions: a resume replays the epoch's batches up to here
  } catch (const std::exception&) {
    return failure;
  }
  const std::string saved = "the " + std::to_string(steps) + " completed steps of epoch " +
                            std::to_string(state_.epoch + 1) + " are saved in " + file.string() +
                            ": once fixed, continue with trainer.resume=" + run_->path().string();
  return Error(failure.kind(), failure.message(), failure.where(), failure.key_path(),
               failure.hint().empty() ? saved : failure.hint() + "\n  " + saved);
}

}  // namespace mixt
