#include "diagnose/float8_watch.h"

#include <algorithm>
#include <string>
#include <utility>

#include "mixt/helpers/float8.h"

namespace mixt::diagnose {

namespace {

// One layer's casts into `into`: the first step's while no step has ended yet.
class LayerCasts final : public Float8CastObserver {
 public:
  LayerCasts(std::string name, Observations& into) : name_(std::move(name)), into_(into) {}

  void observe(Float8Operand operand, const at::Tensor& x, const at::Tensor& scale,
               at::ScalarType float8_dtype) override {
    auto layer = std::find_if(into_.float8_layers.begin(), into_.float8_layers.end(),
                              [&](const Float8Layer& l) { return l.name == name_; });
    if (layer == into_.float8_layers.end()) {
      into_.float8_layers.push_back(Float8Layer{name_, {}, {}});
      layer = std::prev(into_.float8_layers.end());
    }
    auto& counts = into_.steps.empty() ? layer->first_step : layer->later;
    counts[static_cast<std::size_t>(operand)].add(count_float8_cast(x, scale, float8_dtype));
  }

 private:
  std::string name_;
  Observations& into_;
};

class ObservedLinear final : public LinearFunction {
 public:
  ObservedLinear(std::shared_ptr<LinearFunction> function, std::shared_ptr<LayerCasts> casts)
      : function_(std::move(function)), casts_(std::move(casts)) {}

  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    const Float8CastObserverScope scope(casts_);
    return function_->forward(input, weight, bias);
  }

 private:
  std::shared_ptr<LinearFunction> function_;
  std::shared_ptr<LayerCasts> casts_;
};

}  // namespace

Float8Watch::Float8Watch(torch::nn::Module& model, Observations& into) {
  for (const LinearLayer& layer : linear_layers(model)) {
    std::shared_ptr<LinearFunction> original = layer.owner->linear_function(layer.map);
    if (!original) continue;  // at::linear: nothing in float8
    layer.set_function(std::make_shared<ObservedLinear>(original, std::make_shared<LayerCasts>(layer.name, into)));
    wrapped_.push_back({layer, std::move(original)});
  }
}

Float8Watch::~Float8Watch() {
  for (const Wrapped& w : wrapped_) w.layer.set_function(w.original);
}

}  // namespace mixt::diagnose
