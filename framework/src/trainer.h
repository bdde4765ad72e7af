// The trainer: epochs of optimizer steps over the training set, an evaluation after each
// epoch, metrics and checkpoints. The step itself follows the precision contract of
// mixt/precision.h and knows no policy by name.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>

#include "components.h"
#include "progress.h"
#include "run_directory.h"
#include "trainer_options.h"

namespace mixt {

struct Evaluation {
  double loss = NAN;
  double top1 = NAN;  // fraction of samples whose arg-max is the label
  std::int64_t samples = 0;
};

struct TrainResult {
  std::optional<Evaluation> final_eval;
  double train_seconds = 0;
  std::int64_t optimizer_steps = 0;  // attempted, including skipped ones
  std::int64_t skipped_steps = 0;    // skipped by the precision policy (inf/NaN gradients)
  std::int64_t samples = 0;
};

class Trainer {
 public:
  // `run` may be null (no outputs are written, e.g. in tests or `mixt check`).
  Trainer(Components& components, TrainerOptions options, RunDirectory* run, Progress& progress);

  // Continues from a checkpoint written by a run of the same recipe.
  void resume(const std::filesystem::path& checkpoint);
  TrainResult fit();
  Evaluation evaluate(Dataset& dataset);
  void save_checkpoint(const std::filesystem::path& file);

 private:
  void train_epoch(std::int64_t epoch, TrainResult& result);
  void finish_epoch_checkpoint(std::int64_t epoch);
  std::vector<std::pair<std::string, double>> step_metrics() const;
  void log_step(std::int64_t epoch, std::int64_t step, double loss, double samples_per_second);

  Components& c_;
  TrainerOptions options_;
  RunDirectory* run_;
  Progress& progress_;

  // Where the run stands; saved in checkpoints.
  std::int64_t epoch_ = 0;             // the epoch in progress (or next to start)
  std::int64_t batches_in_epoch_ = 0;  // micro-batches of epoch_ already trained on
  std::int64_t global_step_ = 0;       // optimizer steps attempted since the start of training
  std::int64_t skipped_steps_ = 0;     // of those, skipped by the precision policy
};

}  // namespace mixt
