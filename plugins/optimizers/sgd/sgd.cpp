// optimizers/sgd — torch.optim.SGD: momentum, dampening, Nesterov, weight decay.
#include <mixt/plugin.h>
#include <mixt/torch_optimizer.h>
#include <torch/optim/sgd.h>

namespace {

std::unique_ptr<mixt::Optimizer> make_sgd(const mixt::Config& c, const mixt::OptimizerContext& context) {
  const double lr = c.number("lr");
  torch::optim::SGDOptions options(lr);
  options.momentum(c.number("momentum", 0.0))
      .dampening(c.number("dampening", 0.0))
      .weight_decay(c.number("weight_decay", 0.0))
      .nesterov(c.boolean("nesterov", false));
  if (lr < 0) c.fail("lr", "must not be negative");
  if (options.momentum() < 0) c.fail("momentum", "must not be negative");
  if (options.weight_decay() < 0) c.fail("weight_decay", "must not be negative");
  if (options.nesterov() && (options.momentum() <= 0 || options.dampening() != 0)) {
    c.fail("nesterov", "Nesterov momentum needs momentum > 0 and dampening 0");
  }
  const bool decay_1d = c.boolean("weight_decay_1d", true);
  return std::make_unique<mixt::TorchOptimizer>(
      std::make_unique<torch::optim::SGD>(mixt::weight_decay_groups(context, options, decay_1d), options));
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_optimizer("sgd",
                          {"stochastic gradient descent (torch.optim.SGD semantics)",
                           {{"lr", "", "learning rate"},
                            {"momentum", "0.0", "momentum factor"},
                            {"dampening", "0.0", "dampening for momentum"},
                            {"weight_decay", "0.0", "L2 penalty added to the gradient"},
                            {"nesterov", "false", "Nesterov momentum"},
                            {"weight_decay_1d", "true", "also decay 1-D parameters (biases, norm scales)"}}},
                          make_sgd);
}

}  // namespace

MIXT_PLUGIN("sgd", "1.0.0", register_components)
