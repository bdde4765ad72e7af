// optimizers/adamw — torch.optim.AdamW: Adam with decoupled weight decay.
//
// The three implementations torch.optim has, chosen as it chooses them:
//   foreach: false  torch/optim/adam.py `_single_tensor_adam` (decoupled_weight_decay=True),
//                   line by line: torch.optim's default on CPU tensors.
//   foreach: true   `_multi_tensor_adam`: the at::_foreach_ ops, one multi-tensor kernel each
//                   per device and dtype: torch.optim's default on CUDA tensors.
//   foreach: auto   (the default) foreach when every parameter is on CUDA (foreach=None).
//   fused: true     at::_fused_adamw_, the kernel torch.optim.AdamW(fused=True) calls: one
//                   pass over all parameters per device and dtype (CPU and CUDA). Also takes
//                   a loss scaler's grad_scale and found_inf (step_scaled), with no host read.
// Each gives torch.optim's parameters bit for bit (tests/plugins/optimizers/optimizer_parity_test.cpp).
#include <mixt/optimizer.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "../common/grouped_optimizer.h"

namespace {

using mixt::optimizers::GroupedOptimizer;
using mixt::optimizers::ParameterGroup;

// The recipe's `optimizer:` section; the defaults are torch.optim.AdamW's.
struct AdamWOptions {
  double lr = 1e-3;
  std::vector<double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  mixt::optimizers::GroupOptions group;

  double beta1() const { return betas[0]; }
  double beta2() const { return betas[1]; }
};

class AdamW : public GroupedOptimizer {
 public:
  AdamW(std::vector<ParameterGroup> groups, AdamWOptions options)
      : GroupedOptimizer(std::move(groups), {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
                         options.group.kernels.implementation()),
        o_(options) {}

 private:
  enum Slot : std::size_t { kStep, kExpAvg, kExpAvgSq, kMaxExpAvgSq };

  // Python's lazy state initialisation (Adam._init_group): a float32 step counter (on the
  // parameter's device for the fused kernel, on the CPU otherwise) and zero moments.
  void init_state(std::size_t i, const at::Tensor& p) {
    const at::Device step_device = fused() ? p.device() : at::Device(at::kCPU);
    at::Tensor& step = state(i, kStep);
    if (!step.defined()) {
      step = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(step_device));
      state(i, kExpAvg) = at::zeros_like(p, at::MemoryFormat::Preserve);
      state(i, kExpAvgSq) = at::zeros_like(p, at::MemoryFormat::Preserve);
    } else if (step.device() != step_device) {
      step = step.to(step_device);  // resumed from a checkpoint (loaded on the CPU), or fused toggled
    }
    if (o_.amsgrad && !state(i, kMaxExpAvgSq).defined()) {
      state(i, kMaxExpAvgSq) = at::zeros_like(p, at::MemoryFormat::Preserve);
    }
  }

  // torch/optim/adam.py `_single_tensor_adam` with decoupled_weight_decay=True.
  void single_step(const ParameterGroup& group, std::size_t i, at::Tensor& p) override {
    init_state(i, p);
    const at::Tensor& grad = p.grad();
    at::Tensor& step_t = state(i, kStep);
    at::Tensor& exp_avg = state(i, kExpAvg);
    at::Tensor& exp_avg_sq = state(i, kExpAvgSq);
    step_t += 1;
    if (group.weight_decay != 0) p.mul_(1 - group.lr * group.weight_decay);
    exp_avg.lerp_(grad, 1 - o_.beta1());
    exp_avg_sq.mul_(o_.beta2()).addcmul_(grad, grad, 1 - o_.beta2());
    // Python floats are doubles; `x ** y` is C's pow.
    const double step = step_t.item<float>();
    const double bias_correction1 = 1 - std::pow(o_.beta1(), step);
    const double bias_correction2 = 1 - std::pow(o_.beta2(), step);
    const double step_size = group.lr / bias_correction1;
    const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
    at::Tensor denom;
    if (o_.amsgrad) {
      at::Tensor& max_exp_avg_sq = state(i, kMaxExpAvgSq);
      at::maximum_out(max_exp_avg_sq, max_exp_avg_sq, exp_avg_sq);
      denom = (max_exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(o_.eps);
    } else {
      denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(o_.eps);
    }
    p.addcdiv_(exp_avg, denom, -step_size);
  }

  // One device-and-dtype bucket's tensors, as the foreach and fused kernels take them (state
  // initialised first): params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps.
  using Lists = std::array<std::vector<at::Tensor>, 6>;
  Lists gather(const ParameterGroup& group, std::size_t first, const std::vector<std::size_t>& members) {
    Lists lists;
    auto& [params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps] = lists;
    for (std::size_t k : members) {
      init_state(first + k, group.params[k]);
      params.push_back(group.params[k]);
      grads.push_back(group.params[k].grad());
      exp_avgs.push_back(state(first + k, kExpAvg));
      exp_avg_sqs.push_back(state(first + k, kExpAvgSq));
      if (o_.amsgrad) max_exp_avg_sqs.push_back(state(first + k, kMaxExpAvgSq));
      steps.push_back(state(first + k, kStep));
    }
    return lists;
  }

  // torch/optim/adam.py `_multi_tensor_adam` (decoupled weight decay, not capturable), per
  // device and dtype; the step counters stay on the CPU, and the bias corrections are
  // computed from them on the host, one per parameter, as there.
  void foreach_step(ParameterGroup& group, std::size_t first) override {
    for (const auto& [key, members] : fused_buckets(group)) {
      auto [params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps] = gather(group, first, members);
      at::_foreach_add_(steps, 1);
      if (group.weight_decay != 0) at::_foreach_mul_(params, 1 - group.lr * group.weight_decay);
      at::_foreach_lerp_(exp_avgs, grads, 1 - o_.beta1());
      at::_foreach_mul_(exp_avg_sqs, o_.beta2());
      at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - o_.beta2());
      std::vector<at::Scalar> step_sizes, bias_corrections2_sqrt;
      for (const auto& step_t : steps) {
        const double step = step_t.item<float>();  // Python's _get_value(step): a float
        step_sizes.emplace_back((group.lr / (1 - std::pow(o_.beta1(), step))) * -1);
        bias_corrections2_sqrt.emplace_back(std::pow(1 - std::pow(o_.beta2(), step), 0.5));
      }
      std::vector<at::Tensor> denom;
      if (o_.amsgrad) {
        at::_foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs);
        denom = at::_foreach_sqrt(max_exp_avg_sqs);
      } else {
        denom = at::_foreach_sqrt(exp_avg_sqs);
      }
      at::_foreach_div_(denom, bias_corrections2_sqrt);
      at::_foreach_add_(denom, o_.eps);
      at::_foreach_addcdiv_(params, exp_avgs, denom, step_sizes);
    }
  }

  // torch/optim/adam.py `_fused_adam`: per device and dtype, the step counters advance
  // first, then one kernel updates every parameter. From step_scaled() the kernel skips on
  // found_inf 1, and the counters go back by found_inf (exact: small integers in float32),
  // so a skipped step leaves zero moments and step 0: what the first applied step expects.
  void fused_step(ParameterGroup& group, std::size_t first, const mixt::optimizers::KernelScaling& scaling) override {
    for (const auto& [key, members] : fused_buckets(group)) {
      auto [params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps] = gather(group, first, members);
      const at::Device device = params.front().device();
      at::_foreach_add_(steps, 1);
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, group.lr, o_.beta1(),
                        o_.beta2(), group.weight_decay, o_.eps, o_.amsgrad, /*maximize=*/false,
                        scaling.grad_scale_on(device), scaling.found_inf_on(device));
      if (scaling.active()) {
        at::_foreach_sub_(steps, std::vector<at::Tensor>(steps.size(), *scaling.found_inf_on(device)));
      }
    }
  }

  AdamWOptions o_;
};

using O = AdamWOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::lr, "lr", "learning rate", mixt::at_least(0))
        .add(&O::betas, "betas", "coefficients of the running averages",
             [](const std::vector<double>& b) -> std::optional<std::string> {
               if (b.size() == 2 && b[0] >= 0 && b[0] < 1 && b[1] >= 0 && b[1] < 1) return std::nullopt;
               return "expected two numbers in [0, 1), e.g. [0.9, 0.999]";
             })
        .add(&O::eps, "eps", "added to the denominator", mixt::above(0))
        .add(&O::weight_decay, "weight_decay", "decoupled weight decay", mixt::at_least(0))
        .add(&O::amsgrad, "amsgrad", "use the AMSGrad variant")
        .include(&O::group, mixt::optimizers::kGroupOptions);

std::unique_ptr<mixt::Optimizer> make_adamw(const AdamWOptions& o, const mixt::OptimizerContext& context) {
  return std::make_unique<AdamW>(
      mixt::optimizers::weight_decay_groups(context, o.lr, o.weight_decay, o.group.weight_decay_1d), o);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_optimizer("adamw", "Adam with decoupled weight decay (torch.optim.AdamW semantics)", kOptions,
                          make_adamw);
}

}  // namespace

MIXT_PLUGIN("adamw", "1.3.0", register_components)
