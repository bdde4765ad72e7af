// A line-by-line port of torch/amp/grad_scaler.py (PyTorch 2.11). Comments name the Python
// method each piece mirrors; error texts are Python's, so a search for one finds both.
#include "mixt/helpers/grad_scaler.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>

#include <map>

#include "mixt/error.h"

namespace mixt {

namespace {
constexpr const char* kInitFix =
    "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration.";

// _MultiDeviceReplicator: one copy of a scalar per device, made on first request.
class PerDevice {
 public:
  explicit PerDevice(at::Tensor master) : master_(std::move(master)) {}
  const at::Tensor& get(const at::Device& device) {
    for (auto& [d, tensor] : copies_) {
      if (d == device) return tensor;
    }
    copies_.emplace_back(device, master_.to(device, /*non_blocking=*/true, /*copy=*/true));
    return copies_.back().second;
  }
  std::vector<std::pair<at::Device, at::Tensor>> take() { return std::move(copies_); }

 private:
  at::Tensor master_;
  std::vector<std::pair<at::Device, at::Tensor>> copies_;
};
}  // namespace

// __init__
GradScaler::GradScaler(GradScalerOptions options) : options_(options), init_scale_(options.init_scale) {
  if (!options_.enabled) return;
  if (options_.growth_factor <= 1.0) throw runtime_error("The growth factor must be > 1.0.");
  if (options_.backoff_factor >= 1.0) throw runtime_error("The backoff factor must be < 1.0.");
}

GradScaler::OptimizerState& GradScaler::state_of(const Optimizer& optimizer) {
  for (auto& [key, state] : per_optimizer_) {
    if (key == &optimizer) return state;
  }
  per_optimizer_.emplace_back(&optimizer, OptimizerState{});
  return per_optimizer_.back().second;
}

// _check_scale_growth_tracker
void GradScaler::check_initialized(const char* function) const {
  if (!scale_.defined()) {
    throw runtime_error(std::string("Attempted ") + function + " but _scale is None.  " + kInitFix);
  }
  if (!growth_tracker_.defined()) {
    throw runtime_error(std::string("Attempted ") + function + " but _growth_tracker is None.  " + kInitFix);
  }
}

// scale (+ _lazy_init_scale_growth_tracker)
at::Tensor GradScaler::scale(const at::Tensor& outputs) {
  if (!options_.enabled) return outputs;
  if (!scale_.defined()) {
    const auto options = at::TensorOptions().device(outputs.device());
    scale_ = at::full({}, init_scale_, options.dtype(at::kFloat));
    growth_tracker_ = at::full({}, init_growth_tracker_, options.dtype(at::kInt));
  }
  return outputs * scale_.to(outputs.device(), /*non_blocking=*/true);
}

// _unscale_grads_: gradients grouped by device and dtype, one fused kernel per group.
std::vector<std::pair<at::Device, at::Tensor>> GradScaler::unscale_grads(Optimizer& optimizer,
                                                                         const at::Tensor& inv_scale,
                                                                         const at::Tensor& found_inf,
                                                                         bool allow_fp16) {
  PerDevice per_device_inv_scale(inv_scale);
  PerDevice per_device_found_inf(found_inf);
  // Ordered like Python's dict of dicts: by first appearance of each device, then dtype.
  std::vector<std::pair<at::Device, std::map<at::ScalarType, std::vector<at::Tensor>>>> groups;
  std::map<at::ScalarType, std::vector<at::Tensor>> unused;
  at::NoGradGuard no_grad;
  for (at::Tensor param : optimizer.parameters()) {
    at::Tensor grad = param.mutable_grad();
    if (!grad.defined()) continue;
    if (!allow_fp16 && grad.scalar_type() == at::kHalf) {
      throw runtime_error("Attempting to unscale FP16 gradients.",
                          "keep parameters in float32 and let autocast make the float16 copies");
    }
    at::Tensor to_unscale;
    if (grad.is_sparse()) {
      if (grad.scalar_type() == at::kHalf) {
        param.mutable_grad() = grad.coalesce();
        grad = param.mutable_grad();
      }
      to_unscale = grad._values();
    } else {
      to_unscale = grad;
    }
    auto group = groups.begin();
    while (group != groups.end() && group->first != to_unscale.device()) ++group;
    if (group == groups.end()) {
      groups.emplace_back(to_unscale.device(), unused);
      group = std::prev(groups.end());
    }
    // std::map orders dtypes by enum value, Python by first appearance; the result is the
    // same because the kernel only ORs into found_inf and scales each tensor on its own.
    group->second[to_unscale.scalar_type()].push_back(to_unscale);
  }
  for (auto& [device, per_dtype] : groups) {
    for (auto& [dtype, grads] : per_dtype) {
      at::Tensor device_found_inf = per_device_found_inf.get(device);
      at::_amp_foreach_non_finite_check_and_unscale_(grads, device_found_inf, per_device_inv_scale.get(device));
    }
  }
  return per_device_found_inf.take();
}

// unscale_
void GradScaler::unscale_(Optimizer& optimizer) {
  if (!options_.enabled) return;
  check_initialized("unscale_");
  OptimizerState& state = state_of(optimizer);
  if (state.stage == Stage::unscaled) {
    throw runtime_error("unscale_() has already been called on this optimizer since the last update().");
  }
  if (state.stage == Stage::stepped) throw runtime_error("unscale_() is being called after step().");
  // Reciprocal in double, as Python does (except on MPS): the same float inv_scale bits.
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  const at::Tensor found_inf = at::full({}, 0.0, at::TensorOptions().dtype(at::kFloat).device(scale_.device()));
  state.found_inf_per_device = unscale_grads(optimizer, inv_scale, found_inf, /*allow_fp16=*/false);
  agree_across_ranks(state);
  state.stage = Stage::unscaled;
}

// One tiny collective per device, still no host synchronisation: every rank then decides
// (step or skip) and updates the scale on the same flags.
void GradScaler::agree_across_ranks(OptimizerState& state) const {
  if (options_.communicator == nullptr || options_.communicator->world_size() <= 1) return;
  for (auto& [device, flag] : state.found_inf_per_device) options_.communicator->all_reduce(flag, ReduceOp::max);
}

// step: the _step_supports_amp_scaling branch, or the general path (+ _maybe_opt_step).
StepOutcome GradScaler::step(Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  check_initialized("step");
  if (state_of(optimizer).stage == Stage::stepped) {
    throw runtime_error("step() has already been called since the last update().");
  }
  if (options_.step_on_device && optimizer.can_step_scaled()) return step_scaled(optimizer, state_of(optimizer));
  if (state_of(optimizer).stage == Stage::ready) unscale_(optimizer);
  OptimizerState& state = state_of(optimizer);
  if (state.found_inf_per_device.empty()) throw runtime_error("No inf checks were recorded for this optimizer.");
  double found = 0;
  for (const auto& [device, flag] : state.found_inf_per_device) found += flag.item<double>();
  const bool applied = found == 0;
  if (applied) optimizer.step();
  state.stage = Stage::stepped;
  return applied;
}

// step's _step_supports_amp_scaling branch (with _check_inf_per_device): the optimizer
// divides by the scale itself, unless unscale_() did, and skips on the device.
StepOutcome GradScaler::step_scaled(Optimizer& optimizer, OptimizerState& state) {
  at::Tensor grad_scale;
  if (state.stage == Stage::ready) {
    const auto options = at::TensorOptions().dtype(at::kFloat).device(scale_.device());
    state.found_inf_per_device =
        unscale_grads(optimizer, at::full({}, 1.0, options), at::full({}, 0.0, options), /*allow_fp16=*/true);
    agree_across_ranks(state);
    grad_scale = scale_;
  }
  if (state.found_inf_per_device.empty()) throw runtime_error("No inf checks were recorded for this optimizer.");
  // The kernels skip only on exactly 1 (`*found_inf_ptr == 1`), so a sum over several devices
  // is clamped. A copy in any case: update() adds into the first flag in place, and this one
  // must stay this optimizer's own.
  at::Tensor found_inf = state.found_inf_per_device.front().second.to(scale_.device(), /*non_blocking=*/true);
  for (std::size_t i = 1; i < state.found_inf_per_device.size(); ++i) {
    found_inf = found_inf + state.found_inf_per_device[i].second.to(scale_.device(), /*non_blocking=*/true);
  }
  found_inf = found_inf.clamp_max(1.0);
  optimizer.step_scaled(grad_scale, found_inf);
  state.stage = Stage::stepped;
  return StepOutcome::skipped_if(found_inf);
}

// update(None)
void GradScaler::update() {
  if (!options_.enabled) return;
  check_initialized("update");
  std::vector<at::Tensor> found_infs;
  for (const auto& [optimizer, state] : per_optimizer_) {
    for (const auto& [device, flag] : state.found_inf_per_device) {
      found_infs.push_back(flag.to(scale_.device(), /*non_blocking=*/true));
    }
  }
  if (found_infs.empty()) throw runtime_error("No inf checks were recorded prior to update.");
  at::Tensor found_inf_combined = found_infs[0];
  for (std::size_t i = 1; i < found_infs.size(); ++i) found_inf_combined += found_infs[i];
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_combined, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  last_found_inf_ = found_inf_combined;
  per_optimizer_.clear();
}

bool GradScaler::unscaled(const Optimizer& optimizer) const {
  for (const auto& [known, state] : per_optimizer_) {
    if (known == &optimizer) return state.stage != Stage::ready;
  }
  return false;
}

// update(new_scale: float)
void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  check_initialized("update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

// update(new_scale: Tensor)
void GradScaler::update(const at::Tensor& new_scale) {
  if (!options_.enabled) return;
  check_initialized("update");
  const std::string reason =
      "new_scale should be a float or a 1-element torch.cuda.FloatTensor or torch.FloatTensor with "
      "requires_grad=False.";
  if (new_scale.device().type() != scale_.device().type() || new_scale.numel() != 1 || new_scale.requires_grad()) {
    throw runtime_error(reason);
  }
  scale_.copy_(new_scale);
  per_optimizer_.clear();
}

// get_scale
double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<double>() : init_scale_;
}

// _get_growth_tracker
std::int64_t GradScaler::growth_tracker_value() const {
  if (!options_.enabled) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<std::int64_t>() : init_growth_tracker_;
}

// state_dict
std::optional<GradScalerState> GradScaler::state_dict() const {
  if (!options_.enabled) return std::nullopt;
  return GradScalerState{get_scale(), options_.growth_factor, options_.backoff_factor, options_.growth_interval,
                         growth_tracker_value()};
}

// load_state_dict
void GradScaler::load_state_dict(const GradScalerState& state) {
  if (!options_.enabled) return;
  init_scale_ = state.scale;
  if (scale_.defined()) scale_.fill_(state.scale);
  options_.growth_factor = state.growth_factor;
  options_.backoff_factor = state.backoff_factor;
  options_.growth_interval = state.growth_interval;
  init_growth_tracker_ = state.growth_tracker;
  if (growth_tracker_.defined()) growth_tracker_.fill_(state.growth_tracker);
}

void GradScaler::save(torch::serialize::OutputArchive& archive) const {
  const std::optional<GradScalerState> state = state_dict();
  if (!state) return;
  archive.write("scale", c10::IValue(state->scale));
  archive.write("growth_factor", c10::IValue(state->growth_factor));
  archive.write("backoff_factor", c10::IValue(state->backoff_factor));
  archive.write("growth_interval", c10::IValue(state->growth_interval));
  archive.write("_growth_tracker", c10::IValue(state->growth_tracker));
}

void GradScaler::load(torch::serialize::InputArchive& archive) {
  if (!options_.enabled) return;
  c10::IValue scale, growth_factor, backoff_factor, growth_interval, growth_tracker;
  if (!archive.try_read("scale", scale)) {
    throw runtime_error(
        "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
  }
  archive.read("growth_factor", growth_factor);
  archive.read("backoff_factor", backoff_factor);
  archive.read("growth_interval", growth_interval);
  archive.read("_growth_tracker", growth_tracker);
  load_state_dict({scale.toDouble(), growth_factor.toDouble(), backoff_factor.toDouble(), growth_interval.toInt(),
                   growth_tracker.toInt()});
}

}  // namespace mixt
