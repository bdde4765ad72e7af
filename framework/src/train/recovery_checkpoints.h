// The checkpoints that keep a run's work when it does not end at an epoch's end, and what
// is said about them: checkpoints/interrupted for a signal or a stop request mid-epoch and
// for the completed steps of an epoch a failure cut short; which checkpoint holds good
// weights when they turned bad. The epoch-end checkpoint and the callbacks' state after
// the evaluation go through here too, so that the Trainer holds no run directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "common/run_directory.h"
#include "mixt/error.h"
#include "mixt/train_state.h"
#include "train/progress.h"

namespace mixt {

class RecoveryCheckpoints {
 public:
  RecoveryCheckpoints(Checkpointer& checkpointer, TrainState& state, Progress& progress)
      : checkpointer_(checkpointer), state_(state), progress_(progress) {}

  // Where checkpoints go from now on (null: nowhere: tests, `mixt check`, ranks other than 0).
  void write_to(RunDirectory* run) { run_ = run; }
  // The run directory, or empty when this process writes none.
  std::filesystem::path run_path() const { return run_ ? run_->path() : std::filesystem::path(); }
  // Where the next save_interrupted (`mid_epoch`) or save_epoch_end writes; empty without a
  // run directory (the ranks other than 0).
  std::filesystem::path next_file(bool mid_epoch) const;
  // The checkpoint the run resumed from, named when nothing newer holds good weights.
  void resumed_from(std::filesystem::path file) { resumed_from_ = std::move(file); }

  // After an epoch: checkpoints/epoch-NNNN (Checkpointer::save_epoch_end); empty when none is written.
  std::filesystem::path save_epoch_end() const;
  // The epoch's part so far as checkpoints/interrupted, with every rank's data position;
  // empty when none is written.
  std::filesystem::path save_interrupted(const std::vector<std::int64_t>& data_positions) const;
  // The callbacks' state after the evaluation and on_epoch_end, into `checkpoint`; a
  // rewrite that fails (a full disk) leaves it whole, with a warning.
  void update_callback_state(const std::filesystem::path& checkpoint) const;

  // A signal mid-epoch: the interrupted checkpoint, said on the terminal and in log.txt.
  std::filesystem::path interrupted_mid_epoch(std::int64_t step, const std::vector<std::int64_t>& data_positions) const;
  // A signal at an epoch's end (its checkpoint written): which file holds the run, said.
  std::filesystem::path interrupted_at_epoch_end(bool evaluation_skipped) const;
  // `failure` (a runtime error mid-epoch) after saving the epoch's `batches_in_weights`
  // completed micro-batches as checkpoints/interrupted when `weights_good`; its hint says so.
  // (`weights_good` is asked last: it reads the weights.)
  Error with_progress_saved(const Error& failure, std::int64_t batches_in_weights, std::int64_t accumulate,
                            const std::function<bool()>& weights_good) const;
  // "the newest checkpoint (...) is from before it", or why there is none.
  std::string newest_good_checkpoint(const std::string& before_what) const;

 private:
  std::filesystem::path interrupted_file() const { return run_->checkpoints() / "interrupted"; }

  Checkpointer& checkpointer_;
  TrainState& state_;
  Progress& progress_;
  RunDirectory* run_ = nullptr;
  std::filesystem::path resumed_from_;
};

}  // namespace mixt
