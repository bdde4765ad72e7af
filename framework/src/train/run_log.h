// The built-in callback every run has: the progress display (a live bar on a terminal,
// plain lines otherwise), and in the run directory log.txt's epoch lines and
// metrics.jsonl's "step" and "epoch" events.
#pragma once

#include <functional>
#include <utility>

#include "mixt/callback.h"
#include "train/progress.h"
#include "common/run_directory.h"

namespace mixt {

class RunLog final : public Callback {
 public:
  explicit RunLog(Progress& progress) : progress_(progress) {}
  // Where the log and metrics go from now on (null: nowhere).
  void write_to(RunDirectory* run) { run_ = run; }
  // Called before it reads TrainState's counts on a step it shows or logs: the trainer
  // brings a count kept on the device up to date there (the loss is read then anyway).
  void settle_counts_with(std::function<void()> settle) { settle_ = std::move(settle); }

  void on_epoch_start(const EpochStart& epoch) override;
  // Reads the loss from the device only on the steps it shows or logs.
  void on_step_end(const StepEnd& step) override;
  void on_epoch_end(const EpochEnd& epoch) override;

 private:
  Progress& progress_;
  RunDirectory* run_ = nullptr;
  std::function<void()> settle_;
};

}  // namespace mixt
