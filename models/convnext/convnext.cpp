// models/convnext — ConvNeXt tiny and small as torchvision defines them
// (torchvision/models/convnext.py): features.0 is the 4x4 patchify stem, odd indices are
// stages of CNBlocks ("features.1.0.block.0.weight", "features.1.0.layer_scale"), even
// indices from 2 are downsampling layers (LayerNorm2d + 2x2 conv); the classifier is
// LayerNorm2d, Flatten, Linear ("classifier.2.weight").
#include <mixt/plugin.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <mixt/helpers/linear.h>
#include <torch/nn/modules/normalization.h>

#include "../common/layers.h"
#include "../common/zoo.h"

namespace {

using mixt::models::Chain;
using mixt::models::routed;
using mixt::models::routed_blocks;
using mixt::models::stochastic_depth;
using mixt::models::ZooFacts;

constexpr double kEps = 1e-6;

// LayerNorm over the channels of an NCHW tensor (torchvision's LayerNorm2d).
class LayerNorm2dImpl : public torch::nn::Module {
 public:
  explicit LayerNorm2dImpl(std::int64_t channels) : channels_(channels) {
    weight = register_parameter("weight", at::ones({channels}));
    bias = register_parameter("bias", at::zeros({channels}));
  }
  at::Tensor forward(const at::Tensor& x) {
    return at::layer_norm(x.permute({0, 2, 3, 1}), {channels_}, weight, bias, kEps).permute({0, 3, 1, 2});
  }
  at::Tensor weight, bias;

 private:
  std::int64_t channels_;
};

class PermuteImpl : public torch::nn::Module {
 public:
  explicit PermuteImpl(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}
  at::Tensor forward(const at::Tensor& x) { return x.permute(dims_); }

 private:
  std::vector<std::int64_t> dims_;
};

class FlattenImpl : public torch::nn::Module {
 public:
  at::Tensor forward(const at::Tensor& x) { return x.flatten(1); }
};

class CNBlockImpl : public torch::nn::Module {
 public:
  CNBlockImpl(std::int64_t dim, double layer_scale, double sd_prob) : sd_prob_(sd_prob) {
    block = register_module(
        "block", Chain(
                     torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, 7).padding(3).groups(dim)),
                     std::make_shared<PermuteImpl>(std::vector<std::int64_t>{0, 2, 3, 1}),
                     torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(kEps)),
                     mixt::Linear(dim, 4 * dim), torch::nn::GELU(), mixt::Linear(4 * dim, dim),
                     std::make_shared<PermuteImpl>(std::vector<std::int64_t>{0, 3, 1, 2})));
    layer_scale_ = register_parameter("layer_scale", at::full({dim, 1, 1}, layer_scale));
  }
  at::Tensor forward(const at::Tensor& x) {
    return stochastic_depth(layer_scale_ * block->forward(x), sd_prob_, is_training()) + x;
  }
  Chain block{nullptr};

 private:
  double sd_prob_;
  at::Tensor layer_scale_;
};

struct Stage {
  std::int64_t in, out, layers;  // out = 0: the last stage, no downsampling after it
};

class ConvNeXt : public mixt::Model {
 public:
  ConvNeXt(const std::vector<Stage>& stages, double stochastic_depth_prob, double layer_scale,
           std::int64_t num_classes) {
    Chain features;
    features->push_back(Chain(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, stages[0].in, 4).stride(4)),
        std::make_shared<LayerNorm2dImpl>(stages[0].in)));
    std::int64_t total = 0, block_id = 0;
    for (const Stage& s : stages) total += s.layers;
    for (const Stage& s : stages) {
      Chain stage;
      for (std::int64_t i = 0; i < s.layers; ++i) {
        const double p = stochastic_depth_prob * static_cast<double>(block_id++) / (static_cast<double>(total) - 1.0);
        stage->push_back(std::make_shared<CNBlockImpl>(s.in, layer_scale, p));
      }
      features->push_back(stage);
      if (s.out > 0) {
        features->push_back(Chain(
            std::make_shared<LayerNorm2dImpl>(s.in),
            torch::nn::Conv2d(torch::nn::Conv2dOptions(s.in, s.out, 2).stride(2))));
      }
    }
    const std::int64_t last = stages.back().out > 0 ? stages.back().out : stages.back().in;
    features_ = register_module("features", features);
    classifier_ = register_module(
        "classifier", Chain(std::make_shared<LayerNorm2dImpl>(last), std::make_shared<FlattenImpl>(),
                                            mixt::Linear(last, num_classes)));

    // torchvision: trunc_normal_(std=0.02) on conv and linear weights, truncated at +-2
    // (absolute, i.e. 100 standard deviations: a plain normal draw is the same law).
    at::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<torch::nn::Conv2d>()) {
        torch::nn::init::normal_(conv->weight, 0.0, 0.02);
        torch::nn::init::zeros_(conv->bias);
      } else if (auto* linear = module->as<torch::nn::Linear>()) {
        torch::nn::init::normal_(linear->weight, 0.0, 0.02);
        torch::nn::init::zeros_(linear->bias);
      }
    }
  }

  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor features = routed_blocks(*this, "features", features_, x);
    return routed(*this, "classifier", classifier_, at::adaptive_avg_pool2d(features, {1, 1}));
  }

 private:
  Chain features_{nullptr}, classifier_{nullptr};
};

struct Variant {
  const char* name;
  const char* title;
  std::vector<Stage> stages;
  double stochastic_depth_prob;
  ZooFacts facts;
};

// The recipe's `model:` section; each variant has its own default stochastic_depth_prob.
struct ConvNeXtOptions {
  mixt::models::ZooOptions zoo;
  double stochastic_depth_prob = 0.1;
  double layer_scale = 1e-6;
};

void register_components(mixt::Registrar& r) {
  const Variant variants[] = {
      {"convnext_tiny", "ConvNeXt-T", {{96, 192, 3}, {192, 384, 3}, {384, 768, 9}, {768, 0, 3}}, 0.1,
       {28589128, 4.456, 224}},
      {"convnext_small", "ConvNeXt-S", {{96, 192, 3}, {192, 384, 3}, {384, 768, 27}, {768, 0, 3}}, 0.4,
       {50223688, 8.684, 224}},
  };
  using O = ConvNeXtOptions;
  for (const Variant& v : variants) {
    O defaults;
    defaults.stochastic_depth_prob = v.stochastic_depth_prob;
    const auto options =
        mixt::OptionsOf<O>(defaults)
            .include(&O::zoo, mixt::models::kZooOptions)
            .add(&O::stochastic_depth_prob, "stochastic_depth_prob",
                 "drop probability of the last block's residual branch", mixt::models::probability())
            .add(&O::layer_scale, "layer_scale", "initial per-channel scale of each block's branch");
    r.add_model(v.name, mixt::models::zoo_summary(v.title, v.facts), options,
                [v](const O& o, const mixt::ModelContext& context) -> std::shared_ptr<mixt::Model> {
                  mixt::models::require_rgb_images(o.zoo, context);
                  return std::make_shared<ConvNeXt>(v.stages, o.stochastic_depth_prob, o.layer_scale,
                                                    o.zoo.classes(context));
                });
  }
}

}  // namespace

MIXT_PLUGIN("convnext", "1.0.0", register_components)
