// optimizers/adamw — torch.optim.AdamW: Adam with decoupled weight decay.
#include <mixt/plugin.h>
#include <mixt/torch_optimizer.h>
#include <torch/optim/adamw.h>

namespace {

std::unique_ptr<mixt::Optimizer> make_adamw(const mixt::Config& c, const mixt::OptimizerContext& context) {
  const std::vector<double> betas = c.numbers("betas", {0.9, 0.999});
  if (betas.size() != 2 || betas[0] < 0 || betas[0] >= 1 || betas[1] < 0 || betas[1] >= 1) {
    c.fail("betas", "expected two numbers in [0, 1), e.g. [0.9, 0.999]");
  }
  torch::optim::AdamWOptions options(c.number("lr", 1e-3));
  options.betas({betas[0], betas[1]})
      .eps(c.number("eps", 1e-8))
      .weight_decay(c.number("weight_decay", 1e-2))
      .amsgrad(c.boolean("amsgrad", false));
  if (options.lr() < 0) c.fail("lr", "must not be negative");
  if (options.eps() <= 0) c.fail("eps", "must be positive");
  const bool decay_1d = c.boolean("weight_decay_1d", true);
  return std::make_unique<mixt::TorchOptimizer>(
      std::make_unique<torch::optim::AdamW>(mixt::weight_decay_groups(context, options, decay_1d), options));
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_optimizer("adamw",
                          {"Adam with decoupled weight decay (torch.optim.AdamW semantics)",
                           {{"lr", "0.001", "learning rate"},
                            {"betas", "[0.9, 0.999]", "coefficients of the running averages"},
                            {"eps", "1e-08", "added to the denominator"},
                            {"weight_decay", "0.01", "decoupled weight decay"},
                            {"amsgrad", "false", "use the AMSGrad variant"},
                            {"weight_decay_1d", "true", "also decay 1-D parameters (biases, norm scales)"}}},
                          make_adamw);
}

}  // namespace

MIXT_PLUGIN("adamw", "1.0.0", register_components)
