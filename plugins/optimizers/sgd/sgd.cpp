// optimizers/sgd — torch.optim.SGD: momentum, dampening, Nesterov, weight decay.
//
// The three implementations torch.optim has, chosen as it chooses them:
//   foreach: false  torch/optim/sgd.py `_single_tensor_sgd`, line by line: torch.optim's
//                   default on CPU tensors.
//   foreach: true   `_multi_tensor_sgd`: the at::_foreach_ ops, one multi-tensor kernel each
//                   per device and dtype: torch.optim's default on CUDA tensors.
//   foreach: auto   (the default) foreach when every parameter is on CUDA, as torch.optim's
//                   foreach=None.
//   fused: true     at::_fused_sgd_, the kernel torch.optim.SGD(fused=True) calls: one pass
//                   over all parameters per device and dtype (CPU and CUDA). Also takes a
//                   loss scaler's grad_scale and found_inf (step_scaled): no host read, but
//                   with dampening != 0 one per step until every momentum buffer exists.
// Each gives torch.optim's parameters bit for bit (tests/plugins/optimizers/optimizer_parity_test.cpp).
#include <mixt/optimizer.h>
#include <mixt/plugin.h>

#include "../common/grouped_optimizer.h"

namespace {

using mixt::optimizers::GroupedOptimizer;
using mixt::optimizers::Implementation;
using mixt::optimizers::KernelScaling;
using mixt::optimizers::ParameterGroup;

// The recipe's `optimizer:` section; the defaults are torch.optim.SGD's.
struct SgdOptions {
  double lr = 0;
  double momentum = 0, dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  mixt::optimizers::GroupOptions group;
};

class Sgd : public GroupedOptimizer {
 public:
  Sgd(std::vector<ParameterGroup> groups, SgdOptions options)
      : GroupedOptimizer(std::move(groups), {"momentum_buffer"}, options.group.kernels.implementation()),
        o_(options) {}

 private:
  // torch/optim/sgd.py `_single_tensor_sgd`.
  void single_step(const ParameterGroup& group, std::size_t i, at::Tensor& p) override {
    at::Tensor grad = p.grad();
    if (group.weight_decay != 0) grad = grad.add(p, group.weight_decay);
    if (o_.momentum != 0) {
      at::Tensor& buf = state(i, 0);
      if (!buf.defined()) {
        buf = grad.detach().clone();
      } else {
        buf.mul_(o_.momentum).add_(grad, 1 - o_.dampening);
      }
      grad = o_.nesterov ? grad.add(buf, o_.momentum) : buf;
    }
    p.add_(grad, -group.lr);
  }

  // torch/optim/sgd.py `_multi_tensor_sgd`, per device and dtype. As there, Nesterov without
  // weight decay adds the momentum into the gradients themselves (they are p.grad).
  void foreach_step(ParameterGroup& group, std::size_t first) override {
    for (const auto& [key, members] : fused_buckets(group)) {
      std::vector<at::Tensor> params, grads;
      for (std::size_t k : members) {
        params.push_back(group.params[k]);
        grads.push_back(group.params[k].grad());
      }
      if (group.weight_decay != 0) grads = at::_foreach_add(grads, params, group.weight_decay);
      if (o_.momentum != 0) {
        bool all_have_buffers = true;
        for (std::size_t k : members) all_have_buffers = all_have_buffers && state(first + k, 0).defined();
        std::vector<at::Tensor> buffers;
        if (all_have_buffers) {
          for (std::size_t k : members) buffers.push_back(state(first + k, 0));
          at::_foreach_mul_(buffers, o_.momentum);
          at::_foreach_add_(buffers, grads, 1 - o_.dampening);
        } else {  // some start now: one tensor at a time, as the single-tensor path
          for (std::size_t m = 0; m < members.size(); ++m) {
            at::Tensor& buffer = state(first + members[m], 0);
            if (!buffer.defined()) {
              buffer = grads[m].detach().clone();
            } else {
              buffer.mul_(o_.momentum).add_(grads[m], 1 - o_.dampening);
            }
            buffers.push_back(buffer);
          }
        }
        if (o_.nesterov) {
          at::_foreach_add_(grads, buffers, o_.momentum);
        } else {
          grads = buffers;
        }
      }
      at::_foreach_add_(params, grads, -group.lr);
    }
  }

  // torch/optim/sgd.py `_fused_sgd`, with the kernel's is_first_step (start the momentum
  // buffer from the gradient) decided per parameter rather than per group: a parameter whose
  // first gradient comes after the others' (a frozen layer thawed, a branch not taken) starts
  // from its gradient, as in the single-tensor path. torch.optim's fused path fails there (a
  // None buffer reaches the kernel: TypeError); on the group's first step both agree.
  //
  // From step_scaled(), the kernel may skip the step on the device (found_inf 1), and a
  // buffer made for a skipped first step must not hold garbage afterwards (torch 2.11's bug:
  // empty_like, then an early return). With dampening 0 a new buffer starts at zero and
  // continues (is_first_step false): 0 * momentum + 1 * grad is the first step's grad
  // exactly, so no host read. With dampening != 0 the first step differs from a continued
  // one, so found_inf is read on the host, once per step, while some buffer is missing.
  void fused_step(ParameterGroup& group, std::size_t first, const KernelScaling& scaling) override {
    const bool with_momentum = o_.momentum != 0;
    const bool start_at_zero = scaling.active() && o_.dampening == 0;
    for (const auto& [key, members] : fused_buckets(group)) {
      struct Call {
        std::vector<at::Tensor> params, grads, buffers;
      } continuing, starting;  // buffers that exist / buffers this step creates
      for (std::size_t k : members) {
        at::Tensor& buffer = state(first + k, 0);
        if (with_momentum && !buffer.defined() && start_at_zero) buffer = at::zeros_like(group.params[k].grad());
        const bool starts = with_momentum && !buffer.defined();
        if (starts && scaling.skipped()) continue;  // no buffer yet, as if the step had not been called
        Call& call = starts ? starting : continuing;
        call.params.push_back(group.params[k]);
        call.grads.push_back(group.params[k].grad());
        if (!with_momentum) continue;
        if (starts) buffer = at::empty_like(group.params[k].grad());  // the kernel writes the gradient into it
        call.buffers.push_back(buffer);
      }
      for (Call* call : {&continuing, &starting}) {
        if (call->params.empty()) continue;
        const at::Device device = call->params.front().device();
        at::_fused_sgd_(call->params, call->grads, call->buffers, group.weight_decay, o_.momentum, group.lr,
                        o_.dampening, o_.nesterov, /*maximize=*/false, /*is_first_step=*/call == &starting,
                        scaling.grad_scale_on(device), scaling.found_inf_on(device));
      }
    }
  }

  SgdOptions o_;
};

using O = SgdOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .required(&O::lr, "lr", "learning rate", mixt::at_least(0))
        .add(&O::momentum, "momentum", "momentum factor", mixt::at_least(0))
        .add(&O::dampening, "dampening", "dampening for momentum")
        .add(&O::weight_decay, "weight_decay", "L2 penalty added to the gradient", mixt::at_least(0))
        .add(&O::nesterov, "nesterov", "Nesterov momentum")
        .include(&O::group, mixt::optimizers::kGroupOptions)
        .rule("nesterov", [](const O& o) -> std::optional<std::string> {
          if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
            return "Nesterov momentum needs momentum > 0 and dampening 0";
          }
          return std::nullopt;
        });

std::unique_ptr<mixt::Optimizer> make_sgd(const SgdOptions& o, const mixt::OptimizerContext& context) {
  return std::make_unique<Sgd>(
      mixt::optimizers::weight_decay_groups(context, o.lr, o.weight_decay, o.group.weight_decay_1d), o);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_optimizer("sgd", "stochastic gradient descent (torch.optim.SGD semantics)", kOptions, make_sgd);
}

}  // namespace

MIXT_PLUGIN("sgd", "1.3.0", register_components)
