// mixt/helpers/grad_scaler.h — dynamic loss scaling for float16 training: a port of PyTorch's
// torch.amp.GradScaler (torch/amp/grad_scaler.py), which LibTorch does not have.
//
//   mixt::GradScaler scaler;                       // init 2^16, growth 2, backoff 0.5, interval 2000
//   for (...) {
//     optimizer.zero_grad();
//     { mixt::AutocastScope scope(at::kCUDA, at::kHalf); loss = criterion(model(x), y); }
//     scaler.scale(loss).backward();
//     scaler.unscale_(optimizer);                  // optional: only to clip or inspect gradients
//     mixt::StepOutcome applied = scaler.step(optimizer);  // skips the step when a gradient is inf/NaN
//     scaler.update();                             // backs off on overflow, grows after an interval
//   }
//
// Same semantics as Python, on the same ATen kernels (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_): the scale tensor is created lazily on the device of the first scaled
// loss; each optimizer moves READY -> UNSCALED -> STEPPED until update(); misuse raises the
// same errors (unscale twice, unscale after step, step twice, fp16 gradients). scale(),
// unscale_() and update() never synchronise with the device. step() has Python's two paths:
//   - an optimizer that can_step_scaled() (sgd and adamw with fused: true) gets the scale
//     (undefined after unscale_()) and the found-inf flag, and applies or skips on the
//     device: no host read (Python's _step_supports_amp_scaling branch);
//   - any other optimizer: step() reads the found-inf flags once to decide whether to call
//     optimizer.step(), as Python's _maybe_opt_step does.
#pragma once

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "mixt/distributed.h"
#include "mixt/optimizer.h"
#include "mixt/step_outcome.h"

namespace mixt {

// torch.amp.GradScaler's constructor arguments, with its defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;         // 2^16
  double growth_factor = 2.0;          // must be > 1
  double backoff_factor = 0.5;         // must be < 1
  std::int64_t growth_interval = 2000; // consecutive finite steps before growing
  bool enabled = true;                 // false: step() just steps, the rest are no-ops
  // Data-parallel runs: the found-inf flags are all-reduced (max) over the ranks before
  // the step decision, so every rank skips the same steps and keeps the same scale even
  // when only one rank overflowed. Null (the default) for a single process; a policy
  // passes PrecisionContext::communicator.
  const Communicator* communicator = nullptr;
  // With an optimizer that can_step_scaled(): true, step() hands it the scale and found-inf
  // flag and never reads the device; false, it takes the general path (one host read per
  // step), as for any other optimizer. The same numbers while the scale is a power of two
  // (the defaults keep it one); otherwise the last bit of a gradient can differ: the fused
  // kernel divides by the scale (as PyTorch's fused path), unscale_() multiplies by its
  // float32 reciprocal (as PyTorch's general path).
  bool step_on_device = true;
};

// GradScaler.state_dict(): the same five entries, under the same keys in checkpoints
// ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker").
struct GradScalerState {
  double scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  std::int64_t growth_tracker = 0;  // "_growth_tracker": consecutive unskipped steps
};

class GradScaler {
 public:
  // Throws mixt::Error when growth_factor <= 1 or backoff_factor >= 1 (and enabled).
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale. The first call creates the scale on the loss's device.
  at::Tensor scale(const at::Tensor& outputs);
  // Divides the optimizer's gradients by the scale in place and records, per device,
  // whether any was inf/NaN. At most once per optimizer between update()s.
  void unscale_(Optimizer& optimizer);
  // unscale_() if not done yet, then optimizer.step() unless a gradient was inf/NaN; or, for
  // an optimizer that can_step_scaled(), the inf check alone (Python's _check_inf_per_device:
  // gradients left scaled) if not unscaled yet, then optimizer.step_scaled(scale or undefined,
  // found_inf). Returns whether the step ran: decided on the host, or for step_scaled() a
  // device flag read only when asked. At most once per optimizer between update()s.
  StepOutcome step(Optimizer& optimizer);
  // Backs the scale off if any optimizer saw inf/NaN since the last update, else counts a
  // good step and grows the scale every growth_interval of them. Resets every optimizer
  // to READY.
  void update();
  // Sets the scale instead (a float, or a one-element float tensor on the scaler's device).
  void update(double new_scale);
  void update(const at::Tensor& new_scale);

  // The current scale (a device sync), init_scale before the first scale(), 1 if disabled.
  double get_scale() const;
  // The scale tensor without a sync; undefined before the first scale() or if disabled.
  const at::Tensor& scale_tensor() const { return scale_; }

  double get_growth_factor() const { return options_.growth_factor; }
  void set_growth_factor(double factor) { options_.growth_factor = factor; }
  double get_backoff_factor() const { return options_.backoff_factor; }
  void set_backoff_factor(double factor) { options_.backoff_factor = factor; }
  std::int64_t get_growth_interval() const { return options_.growth_interval; }
  void set_growth_interval(std::int64_t interval) { options_.growth_interval = interval; }
  bool is_enabled() const { return options_.enabled; }

  // For a policy that composes the scaler: whether `optimizer`'s gradients are already
  // unscaled since the last update() (by unscale_() or by step()), so that unscaling them
  // again would be the error Python raises. False when disabled.
  bool unscaled(const Optimizer& optimizer) const;
  // The last update()'s found-inf flag, summed over optimizers and devices: a float32
  // scalar on the scale's device, > 0 when that step was skipped. Reading it on the host
  // is a sync; undefined before the first update() and when disabled. update(new_scale)
  // leaves it as it was.
  const at::Tensor& found_inf() const { return last_found_inf_; }

  // nullopt when disabled (Python returns an empty dict). Call after update().
  std::optional<GradScalerState> state_dict() const;
  // No-op when disabled.
  void load_state_dict(const GradScalerState& state);

  // state_dict() into / out of a checkpoint archive, under Python's five keys. Loading an
  // archive written by a disabled scaler into an enabled one is an error, as in Python.
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct OptimizerState {
    Stage stage = Stage::ready;
    std::vector<std::pair<at::Device, at::Tensor>> found_inf_per_device;
  };

  OptimizerState& state_of(const Optimizer& optimizer);
  void check_initialized(const char* function) const;
  std::vector<std::pair<at::Device, at::Tensor>> unscale_grads(Optimizer& optimizer, const at::Tensor& inv_scale,
                                                               const at::Tensor& found_inf, bool allow_fp16);
  // found_inf_per_device all-reduced (max) over the ranks, when there are several.
  void agree_across_ranks(OptimizerState& state) const;
  StepOutcome step_scaled(Optimizer& optimizer, OptimizerState& state);
  std::int64_t growth_tracker_value() const;

  GradScalerOptions options_;
  double init_scale_;
  std::int64_t init_growth_tracker_ = 0;
  at::Tensor scale_;           // float32 scalar, lazily created
  at::Tensor growth_tracker_;  // int32 scalar, lazily created
  at::Tensor last_found_inf_;  // what the last update() combined
  // Keyed by optimizer identity, in first-use order (Python: a dict keyed by id()).
  std::vector<std::pair<const Optimizer*, OptimizerState>> per_optimizer_;
};

}  // namespace mixt
