#include "train/recovery_checkpoints.h"

#include "common/warnings.h"

namespace mixt {

namespace fs = std::filesystem;

fs::path RecoveryCheckpoints::save_epoch_end() const { return run_ ? checkpointer_.save_epoch_end(*run_) : fs::path(); }

fs::path RecoveryCheckpoints::next_file(bool mid_epoch) const {
  if (!run_) return {};
  return mid_epoch ? interrupted_file() : run_->checkpoints() / epoch_checkpoint_name(state_.epoch + 1);
}

fs::path RecoveryCheckpoints::save_interrupted(const std::vector<std::int64_t>& data_positions) const {
  if (!run_) return {};
  const fs::path file = interrupted_file();
  checkpointer_.save(file, data_positions);
  return file;
}

void RecoveryCheckpoints::update_callback_state(const fs::path& checkpoint) const {
  if (checkpoint.empty()) return;
  try {
    checkpointer_.update_callback_state(checkpoint);
  } catch (const Error& e) {
    warn("the callbacks' state after epoch " + std::to_string(state_.epoch + 1) + "'s evaluation is not in " +
         checkpoint.string() + ", which keeps theirs from before it: " + e.message());
  }
}

fs::path RecoveryCheckpoints::interrupted_mid_epoch(std::int64_t step,
                                                    const std::vector<std::int64_t>& data_positions) const {
  const fs::path file = save_interrupted(data_positions);
  if (!run_) return file;
  progress_.note("\ninterrupted: checkpoint written to " + file.string() +
                 " (continue with trainer.resume=" + run_->path().string() + ")");
  run_->append_log("interrupted after step " + std::to_string(step) + " of epoch " +
                   std::to_string(state_.epoch + 1) + " (global step " + std::to_string(state_.global_step) +
                   "): checkpoint " + file.string());
  return file;
}

fs::path RecoveryCheckpoints::interrupted_at_epoch_end(bool evaluation_skipped) const {
  if (!run_) return {};
  // A callback's stop mid-epoch saved the epoch's part as `interrupted` before its evaluation.
  const fs::path file =
      state_.batches_in_epoch > 0 ? interrupted_file() : run_->checkpoints() / epoch_checkpoint_name(state_.epoch + 1);
  const std::string during = evaluation_skipped ? " during the evaluation" : "";
  const std::string after = " after epoch " + std::to_string(state_.epoch + 1);
  progress_.note("\ninterrupted" + during + after + ": its checkpoint is " + file.string() +
                 " (continue with trainer.resume=" + run_->path().string() + ")");
  run_->append_log("interrupted" + during + after + ": checkpoint " + file.string());
  return file;
}

// A runtime failure mid-epoch (a bad file under on_bad_sample: fail, a batch the model
// cannot take, a callback that throws, a rank lost) need not cost the epoch's steps: the
// weights are those of the last completed step, so they are saved as `interrupted`, which
// resuming the run directory continues from (the failed step's micro-batches are trained
// again). Data parallel: rank 0's weights are the run's whichever rank failed, since no
// step is applied without the gradient all-reduce of every rank. Not when the weights are
// broken, when nothing of the epoch is done, or when the checkpoint cannot be written
// either (a full disk).
Error RecoveryCheckpoints::with_progress_saved(const Error& failure, std::int64_t batches_in_weights,
                                               std::int64_t accumulate,
                                               const std::function<bool()>& weights_good) const {
  if (failure.kind() != ErrorKind::runtime || !run_ || batches_in_weights == 0) return failure;
  if (!weights_good()) return failure;
  state_.batches_in_epoch = batches_in_weights;
  const fs::path file = interrupted_file();
  try {
    checkpointer_.save(file);  // no data positions: a resume replays the epoch's batches up to here
  } catch (const std::exception&) {
    return failure;
  }
  const std::string saved = "the " + std::to_string(batches_in_weights / accumulate) + " completed steps of epoch " +
                            std::to_string(state_.epoch + 1) + " are saved in " + file.string() +
                            ": once fixed, continue with trainer.resume=" + run_->path().string();
  return Error(failure.kind(), failure.message(), failure.where(), failure.key_path(),
               failure.hint().empty() ? saved : failure.hint() + "\n  " + saved);
}

std::string RecoveryCheckpoints::newest_good_checkpoint(const std::string& before_what) const {
  if (run_ && fs::exists(run_->checkpoints() / "last")) {
    return "the newest checkpoint (" + (run_->checkpoints() / "last").string() + ") is from before " + before_what;
  }
  if (!resumed_from_.empty()) {
    return "no checkpoint was written from them; the one this run resumed from (" + resumed_from_.string() +
           ") is from before " + before_what;
  }
  return "no checkpoint was written from them";
}

}  // namespace mixt
