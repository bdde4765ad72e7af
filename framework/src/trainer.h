// The trainer: epochs of optimizer steps over the training set, an evaluation after each
// epoch, metrics and checkpoints. The step itself follows the precision contract of
// mixt/precision.h and knows no policy by name.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "components.h"
#include "nonfinite_loss_watch.h"
#include "progress.h"
#include "run_directory.h"
#include "trainer_options.h"

namespace mixt {

namespace distributed {
class DataParallel;
}

struct Evaluation {
  double loss = NAN;
  double top1 = NAN;  // fraction of samples whose arg-max is the label
  std::int64_t samples = 0;
  bool interrupted = false;  // stopped early by Ctrl-C (single process); loss and top1 are NaN
};

struct TrainResult {
  std::optional<Evaluation> final_eval;
  double train_seconds = 0;    // in the training loops only (what samples/s is measured over)
  double elapsed_seconds = 0;  // the whole fit: training, evaluation, checkpoints
  std::int64_t optimizer_steps = 0;  // attempted, including skipped ones
  std::int64_t skipped_steps = 0;    // skipped by the precision policy (inf/NaN gradients)
  std::int64_t samples = 0;
  std::int64_t bad_samples = 0;      // skipped by the data loaders (undecodable files), train and val
};

class Trainer {
 public:
  // `run` may be null (no outputs are written, e.g. in tests, `mixt check`, or on the
  // ranks other than 0). `parallel` is null unless the run is data parallel: then the
  // gradients are averaged over ranks after backward, and losses, evaluations and stop
  // requests are agreed on by all ranks.
  Trainer(Components& components, TrainerOptions options, RunDirectory* run, Progress& progress,
          distributed::DataParallel* parallel = nullptr);

  // Continues from a checkpoint written by a run of the same recipe. Writes nothing, so a
  // checkpoint that does not fit fails before a run directory exists. `check_data_order`:
  // whether a mid-epoch checkpoint must have this run's data order (`mixt check` outside
  // torchrun does not know the number of ranks the run will have).
  void resume(const std::filesystem::path& checkpoint, bool check_data_order = true);
  // Where outputs go from now on (null: nowhere).
  void write_to(RunDirectory* run) { run_ = run; }
  TrainResult fit();
  // Every epoch of trainer.epochs is done (after resuming a finished run).
  bool finished() const { return epoch_ >= options_.epochs; }
  Evaluation evaluate(Dataset& dataset);
  // `data_positions`: every rank's DataLoader::position() when saving mid-epoch (see
  // data_positions()); empty at an epoch's end or for datasets without one.
  void save_checkpoint(const std::filesystem::path& file, const std::vector<std::int64_t>& data_positions = {});

  // Called after every optimizer step with the step's (detached, device-resident) loss;
  // `mixt bench` times steps with it. Reading the loss on the host is the observer's choice.
  using StepObserver = std::function<void(std::int64_t global_step, const at::Tensor& loss)>;
  void on_step(StepObserver observer) { step_observer_ = std::move(observer); }

 private:
  void train_epoch(std::int64_t epoch, TrainResult& result);
  void finish_epoch_checkpoint(std::int64_t epoch);
  // Starts `epoch` of the training data where the run stands (mid-epoch after a resume).
  void start_data(Dataset& data, std::int64_t epoch);
  // Every rank's loader position, rank r's at [r]; a collective in data-parallel runs.
  std::vector<std::int64_t> data_positions() const;
  at::Tensor to_device(const at::Tensor& inputs) const;  // + channels_last when asked
  std::int64_t world_size() const;
  // data.train's dataset, samples and batches per rank, ranks, seed and accumulation: what
  // a mid-epoch position means. Saved with every checkpoint, compared on a mid-epoch resume.
  std::string data_order() const;
  // "the newest checkpoint (...) is from before it", or why there is none: for the
  // messages of a run stopped for broken weights.
  std::string newest_good_checkpoint(const std::string& before_what) const;
  std::vector<std::pair<std::string, double>> step_metrics() const;
  // Throws when an applied step's loss was inf or NaN (trainer.stop_on_nonfinite_loss):
  // called before anything is written from the weights, so no checkpoint holds them.
  void check_loss_finite(std::int64_t epoch) const;
  // Throws when the weights themselves hold inf or NaN (a step applied with non-finite
  // gradients leaves every loss finite): once per epoch and before an interrupt's checkpoint.
  void check_weights_finite(std::int64_t epoch) const;
  // A warning (terminal and log.txt) when the policy skipped all of an epoch's steps.
  void warn_if_every_step_was_skipped(std::int64_t epoch, std::int64_t steps, std::int64_t skipped);
  void log_step(std::int64_t epoch, std::int64_t step, double loss, double samples_per_second,
                double epoch_seconds);
  // `failure` (a runtime error mid-epoch), after saving the epoch's completed steps as
  // checkpoints/interrupted when the weights are still good; its hint then says so.
  Error with_progress_saved(const Error& failure);
  // At an epoch's end, after its checkpoint: whether any rank was asked to stop (one scalar
  // all-reduce per epoch in a data-parallel run).
  bool stop_requested_at_epoch_end() const;
  [[noreturn]] void stop_at_epoch_end(std::int64_t epoch, bool evaluation_skipped);

  Components& c_;
  TrainerOptions options_;
  RunDirectory* run_;
  Progress& progress_;
  StepObserver step_observer_;
  distributed::DataParallel* parallel_;

  // Where the run stands; saved in checkpoints.
  std::int64_t epoch_ = 0;             // the epoch in progress (or next to start)
  std::int64_t batches_in_epoch_ = 0;  // micro-batches of epoch_ already trained on
  // Micro-batches of epoch_ whose optimizer step is in the weights: what a failure saves.
  // Behind batches_in_epoch_ while a step is under way.
  std::int64_t batches_in_weights_ = 0;
  std::int64_t global_step_ = 0;       // optimizer steps attempted since the start of training
  std::int64_t skipped_steps_ = 0;     // of those, skipped by the precision policy
  // From the checkpoint resumed: each rank's DataLoader::position() in epoch_ (empty when the
  // dataset is not a LoaderDataset or the checkpoint predates it); used once, by start_data.
  std::vector<std::int64_t> resume_data_positions_;
  std::filesystem::path resumed_from_;  // the checkpoint resume() read, if any
  NonFiniteLossWatch loss_watch_;  // over the applied steps of this process's training
};

}  // namespace mixt
