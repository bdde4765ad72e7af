// models/simple_cnn — a small convolutional net for 28x28 inputs (Fashion-MNIST, MNIST):
//   [conv3x3 -> (batch norm) -> ReLU -> maxpool2] x len(channels) -> flatten -> linear(hidden)
//   -> ReLU -> dropout -> linear(num_classes)
// `batch_norm: true` adds a mixt::BatchNorm2d after each convolution (which
// trainer.distributed.sync_batchnorm can synchronise).
// Parameter names follow torch.nn.Sequential numbering (features.0.weight, ...) so the
// same net written in Python has the same state_dict keys.
#include <mixt/helpers/batch_norm.h>
#include <mixt/helpers/fp32_modules.h>
#include <mixt/model.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <mixt/helpers/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/functional.h>

namespace {

class SimpleCnn : public mixt::Model {
 public:
  SimpleCnn(std::int64_t in_channels, std::int64_t height, std::int64_t width,
            const std::vector<std::int64_t>& channels, bool batch_norm, std::int64_t hidden, double dropout,
            std::int64_t num_classes) {
    torch::nn::Sequential features;
    std::int64_t previous = in_channels;
    for (std::int64_t out : channels) {
      features->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(previous, out, 3).padding(1)));
      if (batch_norm) features->push_back(mixt::BatchNorm2d(out));
      features->push_back(torch::nn::ReLU());
      features->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
      previous = out;
      height /= 2;
      width /= 2;
    }
    torch::nn::Sequential classifier;
    classifier->push_back(mixt::Linear(previous * height * width, hidden));
    classifier->push_back(torch::nn::ReLU());
    classifier->push_back(torch::nn::Dropout(dropout));
    classifier->push_back(mixt::Linear(hidden, num_classes));
    features_ = register_module("features", features);
    classifier_ = register_module("classifier", classifier);
  }

  // Both halves go through mixt::call_submodule so a recipe may keep either in fp32
  // (precision.fp32_modules: [classifier]); the features are the block that
  // trainer.activation_checkpointing: all recomputes.
  at::Tensor forward(const at::Tensor& input) override {
    const at::Tensor features =
        mixt::call_block(*this, "features", input, [this](const at::Tensor& x) { return features_->forward(x); });
    return mixt::call_submodule(*this, "classifier", features.flatten(1),
                                [this](const at::Tensor& x) { return classifier_->forward(x); });
  }

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::Sequential classifier_{nullptr};
};

// The recipe's `model:` section.
struct SimpleCnnOptions {
  std::optional<std::int64_t> num_classes;  // empty when not given: the dataset's, else 10
  std::vector<std::int64_t> channels = {32, 64};
  bool batch_norm = false;
  std::int64_t hidden = 128;
  double dropout = 0.0;
  mixt::RecipeSection where;  // for the checks against the data
};

using O = SimpleCnnOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .contextual(&O::num_classes, "num_classes", "the dataset's, else 10", "output classes", mixt::at_least(1))
        .add(&O::channels, "channels", "channels of each conv3x3+pool stage",
             [](const std::vector<std::int64_t>& channels) -> std::optional<std::string> {
               if (channels.empty()) return "needs at least one convolution";
               for (const std::int64_t width : channels) {
                 if (width < 1 || width > 65536) return "each must be in [1, 65536], got " + std::to_string(width);
               }
               return std::nullopt;
             })
        .add(&O::batch_norm, "batch_norm", "batch norm after each convolution (mixt::BatchNorm2d)")
        .add(&O::hidden, "hidden", "width of the hidden linear layer", mixt::at_least(1))
        .add(&O::dropout, "dropout", "dropout before the last layer", mixt::at_least(0) && mixt::below(1))
        .recipe_section(&O::where);

std::shared_ptr<mixt::Model> make_simple_cnn(const O& o, const mixt::ModelContext& context) {
  std::vector<std::int64_t> shape = context.sample_shape.empty() ? std::vector<std::int64_t>{1, 28, 28}
                                                                 : context.sample_shape;
  if (shape.size() != 3) {
    o.where.fail("name", "simple_cnn takes images (C x H x W), but the dataset delivers samples of " +
                             std::to_string(shape.size()) + " dimensions");
  }
  const std::int64_t shrink = std::int64_t{1} << o.channels.size();
  if (shape[1] < shrink || shape[2] < shrink) {
    o.where.fail("channels", "too many pooling stages for " + std::to_string(shape[1]) + "x" +
                                 std::to_string(shape[2]) + " inputs");
  }
  const std::int64_t num_classes = o.num_classes.value_or(context.num_classes > 0 ? context.num_classes : 10);
  return std::make_shared<SimpleCnn>(shape[0], shape[1], shape[2], o.channels, o.batch_norm, o.hidden, o.dropout,
                                     num_classes);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_model("simple_cnn", "small conv net for 28x28 images (Fashion-MNIST)", kOptions, make_simple_cnn);
}

}  // namespace

MIXT_PLUGIN("simple_cnn", "1.0.0", register_components)
