// The built-in callback every run has: the progress display (a live bar on a terminal,
// plain lines otherwise), and in the run directory log.txt's epoch lines and
// metrics.jsonl's "step" and "epoch" events.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/run_directory.h"
#include "common/warnings.h"
#include "mixt/callback.h"
#include "train/progress.h"
#include "train/stop_control.h"

namespace mixt {

class RunLog final : public Callback {
 public:
  explicit RunLog(Progress& progress) : progress_(progress) {}
  // Where the log and metrics go from now on (null: nowhere).
  void write_to(RunDirectory* run) { run_ = run; }
  // Called before it reads TrainState's counts on a step it shows or logs: the trainer
  // brings a count kept on the device up to date there (the loss is read then anyway).
  void settle_counts_with(std::function<void()> settle) { settle_ = std::move(settle); }
  // The task's samples hold several predictions each (Task::throughput): the progress shows
  // them per second, and step events give <unit>_per_s beside samples_per_s.
  void count_predictions(std::optional<Throughput> throughput) { throughput_ = std::move(throughput); }
  const std::optional<Throughput>& throughput() const { return throughput_; }

  // A line on the terminal (not in log.txt).
  void note(const std::string& line) const { progress_.note(line); }
  // While the returned object lives, every warning also goes to log.txt and to
  // metrics.jsonl as a "warning" event (nothing when the run writes no directory).
  std::unique_ptr<WarningLog> capture_warnings() const;
  // A callback's stop request ended the run: said on the terminal, in log.txt and as a
  // "stop" event. `where`: "after epoch 2 of 5", "in epoch 2, after step 40".
  void stopped_early(const StopRequest& request, const TrainState& state, const std::string& where) const;

  void on_epoch_start(const EpochStart& epoch) override;
  // Reads the loss from the device only on the steps it shows or logs.
  void on_step_end(const StepEnd& step) override;
  void on_epoch_end(const EpochEnd& epoch) override;

 private:
  Progress& progress_;
  RunDirectory* run_ = nullptr;
  std::function<void()> settle_;
  std::optional<Throughput> throughput_;  // none: one prediction per sample
};

}  // namespace mixt
