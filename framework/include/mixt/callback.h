// mixt/callback.h — the callback interface: code that observes the training loop.
//
// A callback is called at fixed points of mixt's loop (see docs/architecture.md): once
// when training starts, at every epoch's start, after every optimizer step, around every
// evaluation, at every epoch's end, when the run is interrupted and when it ends. It observes: it never
// changes the step's arithmetic, except that on_evaluation_start/end may swap other
// weights into the model for the evaluation and back (an EMA of the weights).
//
// Values on the device stay there: StepEnd::loss is a device tensor, and reading it on
// the host (loss.item()) synchronises with the device. A callback that reads nothing adds
// no synchronisation; one that reads every N steps pays every N steps.
//
// A callback steers only through StepEnd::control and EpochEnd::control: it may ask for the
// run to end (mixt/train_control.h), e.g. early stopping. Everything a callback throws
// stops the run as a runtime failure (exit 1) naming the callback and its plugin; the
// checkpoints written so far stay, and the epoch's completed steps are saved as
// checkpoints/interrupted, as for any failure mid-epoch.
//
// Its state (save/load) is kept in checkpoints under its name (with the entry's `label`,
// or its number, when a recipe lists one callback twice), so the order of `callbacks:`
// does not matter. An epoch's checkpoint holds the state after that epoch's evaluation
// and on_epoch_end: the checkpoint is written before the evaluation (a failing evaluation
// costs no training), then rewritten whole if a callback's state changed.
#pragma once

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mixt/model.h"
#include "mixt/precision.h"
#include "mixt/task.h"
#include "mixt/train_control.h"
#include "mixt/train_state.h"

namespace mixt {

class WeightShards;  // mixt/weight_shards.h

struct FitStart {
  const TrainState& state;  // epoch/global_step past 0 when the run resumed a checkpoint
  // The run directory (recipe.yaml, metrics.jsonl, checkpoints/); empty when the run
  // writes none (mixt bench, tests, the data-parallel ranks other than 0).
  std::filesystem::path run_directory;
  int rank = 0;  // this process's rank in a data-parallel run, else 0
  int world_size = 1;
};

struct EpochStart {
  const TrainState& state;          // state.epoch: the epoch starting (0-based)
  std::int64_t steps_in_epoch = 0;  // optimizer steps it will have
  std::int64_t first_step = 0;      // steps of it already done (a mid-epoch resume), else 0
};

struct StepEnd {
  const TrainState& state;          // global_step counts this step
  std::int64_t epoch_step = 0;      // 1-based within the epoch
  std::int64_t steps_in_epoch = 0;  // optimizer steps this epoch will have
  // Whether the precision policy applied it (false: skipped, inf/NaN gradients). Converts to
  // bool; for a step decided on the device (a sync-free loss-scaled step) the first read is a
  // host synchronisation, so a callback that needs it only on some steps asks only then.
  StepOutcome applied = true;
  // The step's training loss, the mean over its micro-batches (and over ranks in a
  // data-parallel run, where it is already on the host): a detached scalar tensor, on the
  // device otherwise.
  at::Tensor loss;
  double learning_rate = 0;  // the optimizer's, after the step (and the scheduler's step)
  // The policy's own figures (loss_scale, ...) through precision.metrics(), which may read
  // the device: call it on the steps you report.
  const PrecisionPolicy& precision;
  std::int64_t epoch_samples = 0;  // training samples of this epoch so far, over all ranks
  double epoch_seconds = 0;        // since this process's part of the epoch began
  bool logged = false;             // a trainer.log_every step: mixt reads the loss anyway
  TrainControl& control;           // to ask for the run to end after this step
  // The global 2-norm of the gradients the optimizer stepped on, before clipping: the
  // masters' under master-weight policies, unscaled under loss scaling (inf or NaN on a step
  // a loss scaler skipped). A scalar on the device, so reading it is a synchronisation
  // there. Defined on logged steps, and on every step when trainer.clip_grad_norm > 0,
  // trainer.grad_norm is every_step or a callback reads_grad_norm_every_step(); undefined
  // on the others.
  at::Tensor grad_norm{};
};

// A finished evaluation on data.val (sums over every rank in a data-parallel run).
struct Evaluation {
  // Whose weights: empty for the model's own, else the name a callback gave in
  // Callback::evaluated_weights() ("ema"), which suffixes the reported figures (val_top1_ema).
  std::string weights;
  double loss = NAN;  // the task's mean loss per prediction (cross-entropy per sample, per token)
  std::int64_t samples = 0;
  bool interrupted = false;  // stopped early by Ctrl-C: loss and every figure are NaN
  // The task's figures (mixt/task.h), in its order: top1 and top5, or perplexity.
  std::vector<Figure> figures{};

  // The figure named `name` ("top1"), or NaN when the task reports none by that name.
  double figure(const std::string& name) const {
    for (const Figure& f : figures) {
      if (f.name == name) return f.value;
    }
    return NAN;
  }
};

struct EpochEnd {
  const TrainState& state;   // state.epoch: the epoch that ended (0-based)
  const Evaluation* evaluation = nullptr;  // the model's own; null without validation data
  std::vector<Evaluation> other_weights{};  // the callbacks' weights (Callback::evaluated_weights)
  std::int64_t bad_samples = 0;  // skipped by the datasets this epoch, train and val, all ranks
  double elapsed_seconds = 0;    // since training (this process's part of it) began
  // The checkpoint just written for this epoch (checkpoints/epoch-NNNN, or
  // checkpoints/interrupted when a stop request ended the epoch early); empty when the run
  // writes none (tests, mixt bench, the ranks other than 0). It holds the callbacks' state
  // from before this evaluation until on_epoch_end returns; copy it later (a next hook).
  std::filesystem::path checkpoint{};
  TrainControl& control;  // to ask for the run to end after this epoch
};

class Callback {
 public:
  virtual ~Callback() = default;

  virtual void on_fit_start(const FitStart& /*fit*/) {}
  virtual void on_epoch_start(const EpochStart& /*epoch*/) {}
  virtual void on_step_end(const StepEnd& /*step*/) {}
  // True asks for StepEnd::grad_norm on every step (as `trainer.grad_norm: every_step` does),
  // for a callback that watches it: one norm of all gradients per step, on the device.
  virtual bool reads_grad_norm_every_step() const { return false; }
  // Other weights this callback evaluates besides the model's own, e.g. "ema": after the
  // model's own evaluation the trainer runs one more for them, and the callback swaps them
  // into the model at its on_evaluation_start and back at its on_evaluation_end. Empty: none.
  virtual std::string evaluated_weights() const { return {}; }
  // Around each evaluation after an epoch (the model is in eval mode in between). `weights`
  // is empty for the model's own, else a callback's evaluated_weights().
  virtual void on_evaluation_start(const TrainState& /*state*/, const std::string& /*weights*/) {}
  virtual void on_evaluation_end(const TrainState& /*state*/, const Evaluation& /*evaluation*/) {}
  // After the epoch's checkpoint and evaluation (an early stop mid-epoch ends its epoch too).
  virtual void on_epoch_end(const EpochEnd& /*epoch*/) {}
  // The run stops for a signal; `checkpoint` is the file just written (empty when none).
  // The last chance to flush what the callback writes: the process exits with 130.
  virtual void on_interrupt(const TrainState& /*state*/, const std::filesystem::path& /*checkpoint*/) {}
  // Every epoch is done, or a callback's stop request ended the run.
  virtual void on_fit_end(const TrainState& /*state*/) {}

  // The callback's own state in checkpoints, so `trainer.resume` continues it. A
  // checkpoint from a run without this callback leaves it as constructed (with a warning).
  virtual void save(torch::serialize::OutputArchive& /*archive*/) const {}
  virtual void load(torch::serialize::InputArchive& /*archive*/) {}
};

// What a callback factory may need besides its own options.
struct CallbackContext {
  at::Device device = at::kCPU;
  std::shared_ptr<Model> model;  // the model being trained
  int rank = 0;                  // this process's rank in a data-parallel run, else 0
  int world_size = 1;
  // The figures the recipe's task reports (values unset): what a callback may watch as
  // val_<name>. Since ABI 5.1.
  std::vector<Figure> task_figures{};
  // The weights as this rank keeps them (mixt/weight_shards.h), for a callback that keeps a
  // copy of them: chunks under trainer.distributed.sharding: parameters, else the whole
  // model. Null only where a caller built the context without it (tests). Since ABI 6.7.
  std::shared_ptr<const WeightShards> weight_shards{};
};

}  // namespace mixt
