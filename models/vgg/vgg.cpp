// models/vgg — VGG 11/13/16/19, with and without batch norm, as torchvision defines them
// (torchvision/models/vgg.py): "features" and "classifier" are nn.Sequential, so the
// names are "features.0.weight", "features.1.running_mean" (with BN), "classifier.6.bias".
#include <mixt/plugin.h>
#include <torch/nn/init.h>
#include <mixt/helpers/batch_norm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <mixt/helpers/linear.h>

#include "../common/layers.h"
#include "../common/zoo.h"

namespace {

using mixt::models::Act;
using mixt::models::routed;
using mixt::models::routed_block;
using mixt::models::ActivationImpl;

constexpr std::int64_t M = 0;  // a 2x2 max pool in the configurations below

// A parameterless 2x2 max pool, to keep torchvision's Sequential numbering.
class MaxPoolImpl : public torch::nn::Module {
 public:
  at::Tensor forward(const at::Tensor& x) { return at::max_pool2d(x, {2, 2}, {2, 2}); }
};

class Vgg : public mixt::Model {
 public:
  Vgg(const std::vector<std::int64_t>& config, bool batch_norm, std::int64_t num_classes, double dropout) {
    torch::nn::Sequential features;
    std::int64_t channels = 3;
    for (std::int64_t v : config) {
      if (v == M) {
        features->push_back(std::make_shared<MaxPoolImpl>());
        continue;
      }
      features->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, v, 3).padding(1)));
      if (batch_norm) features->push_back(mixt::BatchNorm2d(v));
      features->push_back(std::make_shared<ActivationImpl>(Act::relu));
      channels = v;
    }
    torch::nn::Sequential classifier(
        mixt::Linear(512 * 7 * 7, 4096), std::make_shared<ActivationImpl>(Act::relu), torch::nn::Dropout(dropout),
        mixt::Linear(4096, 4096), std::make_shared<ActivationImpl>(Act::relu), torch::nn::Dropout(dropout),
        mixt::Linear(4096, num_classes));
    features_ = register_module("features", features);
    classifier_ = register_module("classifier", classifier);

    at::NoGradGuard no_grad;  // torchvision's init
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<torch::nn::Conv2d>()) {
        torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
        torch::nn::init::zeros_(conv->bias);
      } else if (auto* linear = module->as<torch::nn::Linear>()) {
        torch::nn::init::normal_(linear->weight, 0.0, 0.01);
        torch::nn::init::zeros_(linear->bias);
      }
    }
  }

  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor features = routed_block(*this, "features", features_, x);
    return routed(*this, "classifier", classifier_, at::adaptive_avg_pool2d(features, {7, 7}).flatten(1));
  }

 private:
  torch::nn::Sequential features_{nullptr}, classifier_{nullptr};
};

struct Variant {
  const char* name;
  std::vector<std::int64_t> config;
  bool batch_norm;
  mixt::models::ZooFacts facts;
};

// The recipe's `model:` section, the same for every variant.
struct VggOptions {
  mixt::models::ZooOptions zoo;
  double dropout = 0.5;
};

using O = VggOptions;
const auto kOptions = mixt::OptionsOf<O>()
                          .include(&O::zoo, mixt::models::kZooOptions)
                          .add(&O::dropout, "dropout", "dropout of the two hidden classifier layers",
                               mixt::models::probability());

void register_components(mixt::Registrar& r) {
  const std::vector<std::int64_t> a = {64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M};
  const std::vector<std::int64_t> b = {64, 64, M, 128, 128, M, 256, 256, M, 512, 512, M, 512, 512, M};
  const std::vector<std::int64_t> d = {64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M};
  const std::vector<std::int64_t> e = {64,  64,  M,   128, 128, M,   256, 256, 256, 256, M,
                                       512, 512, 512, 512, M,   512, 512, 512, 512, M};
  const Variant variants[] = {
      {"vgg11", a, false, {132863336, 7.609, 224}},   {"vgg13", b, false, {133047848, 11.308, 224}},
      {"vgg16", d, false, {138357544, 15.470, 224}},  {"vgg19", e, false, {143667240, 19.632, 224}},
      {"vgg11_bn", a, true, {132868840, 7.609, 224}}, {"vgg13_bn", b, true, {133053736, 11.308, 224}},
      {"vgg16_bn", d, true, {138365992, 15.470, 224}}, {"vgg19_bn", e, true, {143678248, 19.632, 224}},
  };
  for (const Variant& v : variants) {
    std::string title = std::string("VGG-") + (v.name + 3);
    r.add_model(v.name, mixt::models::zoo_summary(title, v.facts), kOptions,
                [v](const O& o, const mixt::ModelContext& context) -> std::shared_ptr<mixt::Model> {
                  mixt::models::require_rgb_images(o.zoo, context);
                  return std::make_shared<Vgg>(v.config, v.batch_norm, o.zoo.classes(context), o.dropout);
                });
  }
}

}  // namespace

MIXT_PLUGIN("vgg", "1.0.0", register_components)
