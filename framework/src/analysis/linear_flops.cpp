#include "analysis/linear_flops.h"

#include <memory>
#include <utility>
#include <vector>

#include "mixt/helpers/linear.h"

namespace mixt {

namespace {

// Counts one layer's forward FLOPs (2 x rows x in x out), then computes it as before.
class CountingLinear : public LinearFunction {
 public:
  CountingLinear(std::shared_ptr<LinearFunction> inner, double& flops) : inner_(std::move(inner)), flops_(flops) {}
  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    flops_ += 2.0 * static_cast<double>(input.numel()) * static_cast<double>(weight.size(0));
    return inner_ ? inner_->forward(input, weight, bias) : at::linear(input, weight, bias);
  }

 private:
  std::shared_ptr<LinearFunction> inner_;
  double& flops_;
};

// Puts each layer's own function back, however the forward pass ended.
struct RestoreFunctions {
  const std::vector<LinearLayer>& layers;
  const std::vector<std::shared_ptr<LinearFunction>>& installed;
  ~RestoreFunctions() {
    for (std::size_t i = 0; i < installed.size(); ++i) layers[i].set_function(installed[i]);
  }
};

}  // namespace

LinearFlops count_linear_flops(torch::nn::Module& model, const std::function<void()>& forward) {
  const std::vector<LinearLayer> layers = linear_layers(model);
  LinearFlops count;
  count.layers = layers.size();
  if (layers.empty()) return count;
  std::vector<double> flops(layers.size(), 0.0);
  std::vector<std::shared_ptr<LinearFunction>> installed;
  {
    const RestoreFunctions restore{layers, installed};
    for (std::size_t i = 0; i < layers.size(); ++i) {
      installed.push_back(layers[i].owner->linear_function(layers[i].map));
      layers[i].set_function(std::make_shared<CountingLinear>(installed.back(), flops[i]));
    }
    forward();
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    count.flops += flops[i];
    if (installed[i]) {
      ++count.policy_layers;
      count.policy_flops += flops[i];
    }
  }
  return count;
}

}  // namespace mixt
