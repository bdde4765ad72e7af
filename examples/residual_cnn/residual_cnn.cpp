// An out-of-tree convolutional model that uses the whole model seam: its residual blocks go
// through mixt::call_block (so `trainer.activation_checkpointing: all` recomputes them), its
// head through mixt::call_submodule (so `precision.fp32_modules: [head]` keeps it in float32
// under autocast), and its batch norms are mixt::BatchNorm2d (running statistics updated
// once per step even when a block is recomputed, and synchronised across ranks on request).
#include <mixt/helpers/activation_checkpointing.h>
#include <mixt/helpers/batch_norm.h>
#include <mixt/helpers/fp32_modules.h>
#include <mixt/model.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>

namespace {

// relu(x + bn(conv(relu(bn(conv(x)))))): torchvision's BasicBlock without a downsampling path.
class ConvBlockImpl : public torch::nn::Module {
 public:
  explicit ConvBlockImpl(std::int64_t channels) {
    const auto conv = [&] { return torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, 3).padding(1).bias(false)); };
    conv1 = register_module("conv1", conv());
    bn1 = register_module("bn1", mixt::BatchNorm2d(channels));
    conv2 = register_module("conv2", conv());
    bn2 = register_module("bn2", mixt::BatchNorm2d(channels));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor inner = bn1->forward(conv1->forward(x)).relu();
    return (x + bn2->forward(conv2->forward(inner))).relu();
  }

 private:
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  mixt::BatchNorm2d bn1{nullptr}, bn2{nullptr};
};
TORCH_MODULE(ConvBlock);

class ResidualCnn : public mixt::Model {
 public:
  ResidualCnn(std::int64_t in_channels, std::int64_t width, std::int64_t blocks, std::int64_t classes) {
    stem_ = register_module("stem", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, width, 3).padding(1)));
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < blocks; ++i) blocks_->push_back(ConvBlock(width));
    head_ = register_module("head", torch::nn::Linear(width, classes));
  }

  // The lambdas may run again in the backward pass: they capture `this` or a block's
  // pointer, never a local of forward().
  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor x = stem_->forward(input).relu();
    for (std::size_t i = 0; i < blocks_->size(); ++i) {
      x = mixt::call_block(*this, "blocks." + std::to_string(i), x,
                           [block = blocks_->ptr<ConvBlockImpl>(i)](const at::Tensor& in) { return block->forward(in); });
    }
    // Global average pooling reads no size off the input: any batch and image size work.
    const at::Tensor pooled = x.mean({2, 3});
    return mixt::call_submodule(*this, "head", pooled, [this](const at::Tensor& in) { return head_->forward(in); });
  }

 private:
  torch::nn::Conv2d stem_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::Linear head_{nullptr};
};

// The recipe's `model:` section: each field's initialiser is its default.
struct ResidualCnnOptions {
  std::int64_t width = 32;
  std::int64_t blocks = 3;
  mixt::RecipeSection where;  // reads nothing: for errors that only the factory can find
};

using O = ResidualCnnOptions;
const auto kOptions = mixt::OptionsOf<O>()
                          .add(&O::width, "width", "channels of every block", mixt::at_least(1))
                          .add(&O::blocks, "blocks", "residual blocks", mixt::at_least(1))
                          .recipe_section(&O::where);

// The options arrive read and checked; what depends on the data is checked here.
std::shared_ptr<mixt::Model> make_residual_cnn(const O& o, const mixt::ModelContext& context) {
  // sample_shape is the training data's [channels, height, width].
  if (context.sample_shape.size() != 3) {
    o.where.fail("name", "residual_cnn takes images [channels, height, width]", "use an image dataset");
  }
  return std::make_shared<ResidualCnn>(context.sample_shape[0], o.width, o.blocks, context.num_classes);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_model("residual_cnn", "a small residual CNN routed for fp32 regions and activation checkpointing",
                      kOptions, make_residual_cnn);
}

}  // namespace

MIXT_PLUGIN("residual_cnn", "1.0.0", register_components)
