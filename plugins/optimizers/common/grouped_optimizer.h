// What mixt's native optimizers (sgd, adamw) share: parameter groups with their own
// learning rate and weight decay, per-parameter state tensors, and that state in checkpoints.
//
// Why native rather than torch::optim: the update must be torch.optim's to the last bit (the
// parity tests compare bitwise), and LibTorch's AdamW rounds differently from Python's
// (mul_+add_ where Python uses lerp_). Writing the few lines of each update keeps them
// next to the Python they mirror, and gives one place for the fused kernels
// (at::_fused_sgd_, at::_fused_adamw_) that torch.optim uses with fused=True, and for the
// _foreach_ ops it uses by default on CUDA.
#pragma once

#include <mixt/error.h>
#include <mixt/optimizer.h>
#include <mixt/options.h>
#include <mixt/helpers/torch_optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mixt::optimizers {

struct ParameterGroup {
  std::vector<at::Tensor> params;
  double lr = 0;
  double weight_decay = 0;
};

// One group, or two with `decay_1d` false and a weight decay (mixt::split_for_weight_decay:
// no weight decay on 1-D parameters). Empty groups are left out.

inline std::vector<ParameterGroup> weight_decay_groups(const OptimizerContext& context, double lr, double weight_decay,
                                                       bool decay_1d) {
  WeightDecaySplit split = split_for_weight_decay(context, decay_1d || weight_decay == 0.0);
  std::vector<ParameterGroup> groups;
  if (!split.decayed.empty()) groups.push_back({std::move(split.decayed), lr, weight_decay});
  if (!split.not_decayed.empty()) groups.push_back({std::move(split.not_decayed), lr, 0.0});
  return groups;
}

// torch.optim's three implementations of an update, and its default choice between them.
enum class Implementation {
  single_tensor,  // a loop over the parameters (torch.optim's default on the CPU)
  foreach,        // the at::_foreach_ ops: one multi-tensor kernel each per device and dtype
  fused,          // one fused kernel per device and dtype (fused=True)
  automatic,      // torch.optim's foreach=None: foreach when every parameter is on CUDA, else single-tensor
};

// The recipe's choice between them: `fused` and `foreach`, checked as torch.optim checks its
// arguments.
struct KernelChoice {
  std::string foreach = "auto";
  bool fused = false;

  Implementation implementation() const {
    if (fused) return Implementation::fused;
    if (foreach == "auto") return Implementation::automatic;
    return foreach == "true" ? Implementation::foreach : Implementation::single_tensor;
  }
};

// What every grouped optimizer reads after its own options.
struct GroupOptions {
  bool weight_decay_1d = true;
  KernelChoice kernels;
};
inline const OptionsOf<KernelChoice> kKernelChoice =
    OptionsOf<KernelChoice>()
        .add(&KernelChoice::foreach, "foreach", "the _foreach_ kernels; auto: when every parameter is on CUDA",
             one_of({"auto", "true", "false"}))
        .add(&KernelChoice::fused, "fused", "one fused kernel for all parameters (torch.optim fused=True)")
        .rule("foreach", [](const KernelChoice& o) -> std::optional<std::string> {
          if (o.fused && o.foreach == "true") return "fused and foreach cannot both be true (as in torch.optim)";
          return std::nullopt;
        });
inline const OptionsOf<GroupOptions> kGroupOptions =
    OptionsOf<GroupOptions>()
        .add(&GroupOptions::weight_decay_1d, "weight_decay_1d", "also decay 1-D parameters (biases, norm scales)")
        .include(&GroupOptions::kernels, kKernelChoice);

// The fused and foreach kernels take parameters of one device and dtype per call (as
// torch.optim's _group_tensors_by_device_and_dtype): the key that groups them.
using FusedBucketKey = std::tuple<int, int, int>;
inline FusedBucketKey fused_bucket_key(const at::Tensor& p) {
  return {static_cast<int>(p.device().type()), p.device().index(), static_cast<int>(p.scalar_type())};
}

// What a fused kernel of one device gets from step_scaled(): its optional grad_scale and
// found_inf arguments, copied to that device without a host read. Default: a plain step().
class KernelScaling {
 public:
  KernelScaling() = default;
  KernelScaling(at::Tensor grad_scale, at::Tensor found_inf)
      : grad_scale_(std::move(grad_scale)), found_inf_(std::move(found_inf)) {}
  bool active() const { return found_inf_.defined(); }
  std::optional<at::Tensor> grad_scale_on(const at::Device& device) const { return on(grad_scale_, device); }
  std::optional<at::Tensor> found_inf_on(const at::Device& device) const { return on(found_inf_, device); }
  // found_inf read on the host (a synchronisation on a GPU), once per step, for an update
  // that cannot be written without knowing it.
  bool skipped() const {
    if (!skipped_) skipped_ = active() && found_inf_.item<float>() == 1.0F;
    return *skipped_;
  }

 private:
  static std::optional<at::Tensor> on(const at::Tensor& t, const at::Device& device) {
    if (!t.defined()) return std::nullopt;
    return t.to(device, /*non_blocking=*/true);
  }
  at::Tensor grad_scale_, found_inf_;
  mutable std::optional<bool> skipped_;
};

class GroupedOptimizer : public Optimizer {
 public:
  // `state_names`: the per-parameter state slots ("momentum_buffer", "exp_avg", ...), also
  // their names in checkpoints.
  // `implementation`: step() calls fused_step() or foreach_step() once per group, or
  // single_step() per parameter with a gradient; step_scaled() only with fused.
  GroupedOptimizer(std::vector<ParameterGroup> groups, std::vector<std::string> state_names,
                   Implementation implementation)
      : groups_(std::move(groups)), state_names_(std::move(state_names)), implementation_(implementation) {
    for (const auto& group : groups_) parameter_count_ += group.params.size();
    state_.assign(parameter_count_, std::vector<at::Tensor>(state_names_.size()));
  }

  void step() final { run(KernelScaling()); }

  // The fused kernels take grad_scale and found_inf (torch.optim's fused=True optimizers
  // advertise _step_supports_amp_scaling the same way); the other implementations do not.
  bool can_step_scaled() const final { return implementation_ == Implementation::fused; }
  void step_scaled(const at::Tensor& grad_scale, const at::Tensor& found_inf) final {
    if (!can_step_scaled()) {
      throw runtime_error("step_scaled() needs the fused kernels: this optimizer was built without fused: true",
                          "set optimizer.fused: true, or call step() (mixt::GradScaler checks can_step_scaled())");
    }
    if (!found_inf.defined()) throw runtime_error("step_scaled() was given no found_inf flag");
    run(KernelScaling(grad_scale, found_inf));
  }

  void zero_grad() override {
    for (const auto& group : groups_) {
      for (const auto& p : group.params) p.mutable_grad() = at::Tensor();
    }
  }

  std::vector<at::Tensor> parameters() const override {
    std::vector<at::Tensor> all;
    for (const auto& group : groups_) all.insert(all.end(), group.params.begin(), group.params.end());
    return all;
  }

  double learning_rate() const override { return groups_.empty() ? 0.0 : groups_.front().lr; }
  void set_learning_rate(double lr) override {
    for (auto& group : groups_) group.lr = lr;
  }

  void save(torch::serialize::OutputArchive& archive) override {
    archive.write("format", at::tensor(kFormat));
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      archive.write("lr/" + std::to_string(g), at::tensor(groups_[g].lr));
    }
    for (std::size_t i = 0; i < parameter_count_; ++i) {
      for (std::size_t s = 0; s < state_names_.size(); ++s) {
        if (state_[i][s].defined()) archive.write(key(i, s), state_[i][s], /*is_buffer=*/true);
      }
    }
  }

  void load(torch::serialize::InputArchive& archive) override {
    at::Tensor format;
    if (!archive.try_read("format", format) || format.item<std::int64_t>() != kFormat) {
      throw runtime_error(
          "the checkpoint's optimizer state is not in the format of this optimizer: it was written by another "
          "optimizer, or by the torch::optim-based sgd/adamw of mixt before 0.2",
          "resume from a checkpoint of the same recipe, or start from its weights only (model.weights)");
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      at::Tensor lr;
      archive.read("lr/" + std::to_string(g), lr);
      groups_[g].lr = lr.item<double>();
    }
    std::size_t i = 0;
    for (const auto& group : groups_) {
      for (const auto& p : group.params) {
        for (std::size_t s = 0; s < state_names_.size(); ++s) {
          at::Tensor value;
          if (!archive.try_read(key(i, s), value)) {
            state_[i][s] = at::Tensor();
          } else {
            // Step counters (0-dim) stay where they were loaded; the optimizer moves them if needed.
            state_[i][s] = value.dim() == 0 ? value : value.to(p.device());
          }
        }
        ++i;
      }
    }
  }

 protected:
  bool fused() const { return implementation_ == Implementation::fused; }
  // One parameter's update; `index` numbers the parameters across groups (for state()).
  virtual void single_step(const ParameterGroup& group, std::size_t index, at::Tensor& p) = 0;
  // One group's update through a fused kernel; its parameters are state() indices
  // first_index, first_index + 1, ... `scaling`: the kernels' grad_scale and found_inf
  // (inactive for a plain step()); a skipped step must leave the state as if not called.
  virtual void fused_step(ParameterGroup& group, std::size_t first_index, const KernelScaling& scaling) = 0;
  // The same through the _foreach_ ops (one multi-tensor kernel each).
  virtual void foreach_step(ParameterGroup& group, std::size_t first_index) = 0;

  // The positions in group.params of the parameters with a gradient, by device and dtype:
  // a fused or foreach kernel takes one device and dtype per call.
  static std::map<FusedBucketKey, std::vector<std::size_t>> fused_buckets(const ParameterGroup& group) {
    std::map<FusedBucketKey, std::vector<std::size_t>> buckets;
    for (std::size_t k = 0; k < group.params.size(); ++k) {
      if (group.params[k].grad().defined()) buckets[fused_bucket_key(group.params[k])].push_back(k);
    }
    return buckets;
  }

  at::Tensor& state(std::size_t parameter, std::size_t slot) { return state_[parameter][slot]; }

 private:
  // One step of every group: fused_step() or foreach_step() per group, or single_step() per
  // parameter with a gradient. `scaling` is active only from step_scaled() (fused only).
  void run(const KernelScaling& scaling) {
    at::NoGradGuard no_grad;
    std::size_t first = 0;
    for (auto& group : groups_) {
      switch (implementation_for(group)) {
        case Implementation::fused:
          fused_step(group, first, scaling);
          break;
        case Implementation::foreach:
          foreach_step(group, first);
          break;
        default:
          for (std::size_t k = 0; k < group.params.size(); ++k) {
            if (group.params[k].grad().defined()) single_step(group, first + k, group.params[k]);
          }
      }
      first += group.params.size();
    }
  }

  static constexpr std::int64_t kFormat = 2;  // 1 was torch::optim's own archive layout
  std::string key(std::size_t i, std::size_t s) const { return "state/" + std::to_string(i) + "/" + state_names_[s]; }
  Implementation implementation_for(const ParameterGroup& group) const {
    if (implementation_ != Implementation::automatic) return implementation_;
    for (const auto& p : group.params) {
      if (!p.is_cuda()) return Implementation::single_tensor;
    }
    return Implementation::foreach;
  }

  std::vector<ParameterGroup> groups_;
  std::vector<std::string> state_names_;
  Implementation implementation_;
  std::size_t parameter_count_ = 0;
  std::vector<std::vector<at::Tensor>> state_;  // [parameter][slot]; undefined until first used
};

}  // namespace mixt::optimizers
