// mixt/precision.h — the precision-policy interface and its contract with the trainer.
//
// The trainer knows no policy by name. Before training, in this order: the model is built
// and moved to the device; the policy is built and setup(model, device) runs; the
// optimizer is built over the model's parameters; one blank batch goes through the model
// under the policy's autocast (mixt check and mixt run alike), so a policy's casts and
// layouts are checked before anything is written.
//
// One optimizer step is, in this order (the one listing of it: Trainer::train_step follows
// it line by line, and the docs link here):
//
//   precision.begin_step(step, logged);                   // the step about to run: its 1-based
//                                                         // global number, whether it is logged
//   optimizer.zero_grad();
//   for each micro-batch (trainer.accumulate: N):
//     { auto scope = precision.autocast(device);          // RAII autocast region (or none)
//       loss = cross_entropy(model(precision.prepare_input(x)), y) / N; }
//     precision.backward(loss);                           // scale (if it scales) + backward
//   [data parallel: the gradients are averaged over the ranks]
//   precision.gradients_ready(optimizer);                 // e.g. masters take the model's gradients
//   if (clipping, a logged step, or trainer.grad_norm: every_step) {
//     precision.unscale(optimizer);                       // true gradients before measuring
//     grad_norm = norm of optimizer.parameters()' grads;  // on the device (StepEnd::grad_norm)
//     if (trainer.clip_grad_norm > 0) scale the grads by min(1, max_norm / (grad_norm + 1e-6)); }
//   StepOutcome applied = precision.step(optimizer);      // unscale if needed, check inf/nan, step or skip
//   precision.update();                                   // loss-scale update
//   if (scheduler && applied.applied()) scheduler.step(); // a host read only for a device outcome
//   [skipped steps counted; the ranks agree on the loss and on stopping; callbacks' on_step_end]
//
// A policy also sets global math modes in setup() (TF32 on or explicitly off), may cast or
// lay out the model, reports metrics, and saves/loads its state in checkpoints.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mixt/autocast.h"
#include "mixt/distributed.h"
#include "mixt/optimizer.h"
#include "mixt/step_outcome.h"

namespace mixt {

class PrecisionPolicy {
 public:
  virtual ~PrecisionPolicy() = default;

  // Once, before training: global math modes, model casts or layout.
  virtual void setup(torch::nn::Module& model, at::Device device) {}
  // The tensors the optimizer updates, by the model's parameter names: the model's own
  // trainable parameters (the default), or master copies the policy keeps (float32 masters
  // of a reduced-precision model). Called once, after setup(), to build the optimizer.
  virtual std::vector<std::pair<std::string, at::Tensor>> optimizer_parameters(torch::nn::Module& model) {
    std::vector<std::pair<std::string, at::Tensor>> parameters;
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
      if (item.value().requires_grad()) parameters.emplace_back(item.key(), item.value());
    }
    return parameters;
  }
  // What the model is fed, in training and evaluation: the batch as the loader made it
  // (float32), or cast for a model the policy cast.
  virtual at::Tensor prepare_input(const at::Tensor& inputs) const { return inputs; }
  // Before each optimizer step: its global number (1-based, counting on through a resume)
  // and whether the trainer logs it (trainer.log_every), so a diagnostic can run every N
  // steps, or on logged steps, without a counter of its own.
  virtual void begin_step(std::int64_t step, bool logged) {}
  // The autocast region for the forward pass and loss. Default: none (full precision).
  virtual AutocastScope autocast(at::DeviceType device) const { return AutocastScope(); }
  // Backward through the loss (scaled, for a policy that scales).
  virtual void backward(const at::Tensor& loss) { loss.backward(); }
  // After backward (and, in a data-parallel run, the gradients' average), before
  // unscale(), clipping and step(): a policy with master weights hands the model's
  // gradients to them here, so that clipping and the optimizer see the masters'.
  virtual void gradients_ready(Optimizer& optimizer) {}
  // Makes the gradients true gradients (unscaled) before clipping or measuring their norm.
  // Called only on the steps that do: step() must unscale when it was not.
  virtual void unscale(Optimizer& optimizer) {}
  // Applies the optimizer step, or skips it; returns whether it was applied: a bool
  // (`return true;`), or, for a policy whose decision stays on the device (a loss scaler
  // handing found_inf to Optimizer::step_scaled), StepOutcome::skipped_if(flag). The trainer
  // then reads the flag only where the host needs it (docs/precision.md).
  virtual StepOutcome step(Optimizer& optimizer) {
    optimizer.step();
    return true;
  }
  // After step(): e.g. grows or backs off the loss scale.
  virtual void update() {}

  // Numbers worth logging, e.g. {"loss_scale", 65536}: read on the steps the trainer shows
  // or logs (a device read there costs a sync only then).
  virtual std::vector<std::pair<std::string, double>> metrics() const { return {}; }

  // The policy's state in checkpoints. A policy whose masters are the real weights writes
  // them with write_named_tensors (mixt/helpers/named_tensors_archive.h) into a nested
  // archive "master_weights": `mixt export` then writes those instead of the model's.
  virtual void save(torch::serialize::OutputArchive& archive) const {}
  virtual void load(torch::serialize::InputArchive& archive) {}
};

struct PrecisionContext {
  at::Device device = at::kCPU;
  // The data-parallel process group, or null when the run is a single process. A policy
  // that can skip steps (a loss scaler) should all-reduce its found-inf flag with
  // ReduceOp::max before deciding, so that every rank skips the same steps and keeps the
  // same scale. (The trainer averages gradients by all-reduce before unscale/step, and an
  // inf or nan in any rank's gradient propagates through that sum to every rank, so the
  // flags already agree; the explicit all-reduce keeps that true for a policy that inspects
  // anything rank-local, and costs one scalar per step.)
  const Communicator* communicator = nullptr;
  // precision.fp32_modules: the submodules the recipe keeps in float32 (mixt routes them
  // through FullPrecisionScope). A policy that casts the model must leave them float32.
  std::vector<std::string> fp32_modules{};
};

}  // namespace mixt
