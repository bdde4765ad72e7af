// models/efficientnet — EfficientNet-B0 as torchvision defines it
// (torchvision/models/efficientnet.py): features.N is a stage (nn.Sequential of MBConv
// blocks), each block's layers are "block.0..3"; stochastic depth grows linearly with the
// block index up to stochastic_depth_prob.
#include <mixt/plugin.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/dropout.h>
#include <mixt/helpers/linear.h>

#include <cmath>

#include "../common/layers.h"
#include "../common/zoo.h"

namespace {

using namespace mixt::models;

struct StageConfig {
  std::int64_t expand_ratio, kernel, stride, in, out, layers;
};

class MBConvImpl : public torch::nn::Module {
 public:
  MBConvImpl(const StageConfig& c, double stochastic_depth_prob)
      : use_residual_(c.stride == 1 && c.in == c.out), sd_prob_(stochastic_depth_prob) {
    const std::int64_t expanded = make_divisible(static_cast<double>(c.in * c.expand_ratio));
    Chain layers;
    if (expanded != c.in) layers->push_back(conv_norm_activation({c.in, expanded, 1, 1, 1, Act::silu}));
    layers->push_back(conv_norm_activation({expanded, expanded, c.kernel, c.stride, expanded, Act::silu}));
    layers->push_back(std::make_shared<SqueezeExcitationImpl>(expanded, std::max<std::int64_t>(1, c.in / 4), Act::silu,
                                                              Act::sigmoid));
    layers->push_back(conv_norm_activation({expanded, c.out, 1, 1, 1, Act::none}));
    block_ = register_module("block", layers);
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = block_->forward(x);
    if (!use_residual_) return y;
    return stochastic_depth(y, sd_prob_, is_training()) + x;
  }

 private:
  bool use_residual_;
  double sd_prob_;
  Chain block_{nullptr};
};

class EfficientNet : public mixt::Model {
 public:
  EfficientNet(std::int64_t num_classes, double dropout, double stochastic_depth_prob) {
    // expand, kernel, stride, in, out, layers: torchvision's B0 (width and depth 1.0).
    const StageConfig stages[] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},  {6, 5, 2, 24, 40, 2},
                                  {6, 3, 2, 40, 80, 3},  {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4},
                                  {6, 3, 1, 192, 320, 1}};
    std::int64_t total = 0;
    for (const auto& s : stages) total += s.layers;
    Chain features;
    features->push_back(conv_norm_activation({3, stages[0].in, 3, 2, 1, Act::silu}));
    std::int64_t block_id = 0;
    for (const auto& s : stages) {
      Chain stage;
      for (std::int64_t i = 0; i < s.layers; ++i) {
        StageConfig c = s;
        if (i > 0) {
          c.in = c.out;
          c.stride = 1;
        }
        const double p = stochastic_depth_prob * static_cast<double>(block_id++) / static_cast<double>(total);
        stage->push_back(std::make_shared<MBConvImpl>(c, p));
      }
      features->push_back(stage);
    }
    const std::int64_t last = 4 * stages[6].out;
    features->push_back(conv_norm_activation({stages[6].out, last, 1, 1, 1, Act::silu}));
    features_ = register_module("features", features);
    classifier_ = register_module("classifier",
                                  Chain(torch::nn::Dropout(dropout), mixt::Linear(last, num_classes)));

    at::NoGradGuard no_grad;  // torchvision's init
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<torch::nn::Conv2d>()) {
        torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut);
        if (conv->bias.defined()) torch::nn::init::zeros_(conv->bias);
      } else if (auto* linear = module->as<torch::nn::Linear>()) {
        const double range = 1.0 / std::sqrt(static_cast<double>(linear->options.out_features()));
        torch::nn::init::uniform_(linear->weight, -range, range);
        torch::nn::init::zeros_(linear->bias);
      }
    }
  }

  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor features = routed_blocks(*this, "features", features_, x);
    return routed(*this, "classifier", classifier_, at::adaptive_avg_pool2d(features, {1, 1}).flatten(1));
  }

 private:
  Chain features_{nullptr}, classifier_{nullptr};
};

// The recipe's `model:` section; the defaults are torchvision's.
struct EfficientNetOptions {
  ZooOptions zoo;
  double dropout = 0.2;
  double stochastic_depth_prob = 0.2;
};

using O = EfficientNetOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .include(&O::zoo, kZooOptions)
        .add(&O::dropout, "dropout", "dropout before the classifier", probability())
        .add(&O::stochastic_depth_prob, "stochastic_depth_prob", "drop probability of the last block's residual branch",
             probability());

void register_components(mixt::Registrar& r) {
  r.add_model("efficientnet_b0", zoo_summary("EfficientNet-B0", ZooFacts{5288548, 0.386, 224}), kOptions,
              [](const O& o, const mixt::ModelContext& context) -> std::shared_ptr<mixt::Model> {
                require_rgb_images(o.zoo, context);
                return std::make_shared<EfficientNet>(o.zoo.classes(context), o.dropout, o.stochastic_depth_prob);
              });
}

}  // namespace

MIXT_PLUGIN("efficientnet", "1.0.0", register_components)
