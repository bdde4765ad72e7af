// How the Trainer stops: for a signal (mid-epoch or at an epoch's end, with the checkpoint
// that makes `trainer.resume` lose nothing) and on a failure mid-epoch (saving the
// epoch's completed steps when the weights are still good).
#include "train/trainer.h"

#include "common/interrupt.h"

namespace mixt {

namespace fs = std::filesystem;

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
  notify("on_interrupt", [&](Callback& c) { c.on_interrupt(state_, file); });
  coordinator_.barrier();
  throw Error(ErrorKind::interrupted, "interrupted");
}

// A stop asked for during an evaluation or a checkpoint: the epoch's checkpoint is written,
// so stopping here loses nothing, where going on would wait for one more training step
// (and, before it, the rest of an evaluation that may take minutes).
bool Trainer::stop_requested_at_epoch_end() const {
  return coordinator_.sum({interrupt_requested() ? 1.0 : 0.0})[0] > 0;
}

void Trainer::stop_at_epoch_end(bool evaluation_skipped) {
  fs::path file;
  if (run_) {
    file = run_->checkpoints() / epoch_checkpoint_name(state_.epoch + 1);
    const std::string during = evaluation_skipped ? " during the evaluation" : "";
    const std::string after = " after epoch " + std::to_string(state_.epoch + 1);
    progress_.note("\ninterrupted" + during + after + ": its checkpoint is " + file.string() +
                   " (continue with trainer.resume=" + run_->path().string() + ")");
    run_->append_log("interrupted" + during + after + ": checkpoint " + file.string());
  }
  notify("on_interrupt", [&](Callback& c) { c.on_interrupt(state_, file); });
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
  if (loss_watch_.first_step() || !weights_finite()) return failure;
  const std::int64_t steps = batches_in_weights_ / options_.accumulate;
  state_.batches_in_epoch = batches_in_weights_;
  const fs::path file = run_->checkpoints() / "interrupted";
  try {
    skipped_.settle();
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
