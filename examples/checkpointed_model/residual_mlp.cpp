// An out-of-tree model whose memory a recipe can trade for compute: each residual block goes
// through mixt::call_block, so `trainer.activation_checkpointing: all` (or a list such as
// [blocks.1]) recomputes it in the backward pass, and `recompute_stem: true` shows the
// primitive underneath, mixt::recompute_in_backward, used by the model itself.
#include <mixt/helpers/activation_checkpointing.h>
#include <mixt/helpers/batch_norm.h>
#include <mixt/helpers/fp32_modules.h>
#include <mixt/model.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>

namespace {

// x + dropout(relu(bn(linear(x)))): parameters, running statistics and random draws, all of
// which a recomputed forward must reproduce.
class ResidualBlockImpl : public torch::nn::Module {
 public:
  explicit ResidualBlockImpl(std::int64_t width) {
    linear = register_module("linear", torch::nn::Linear(width, width));
    norm = register_module("norm", mixt::BatchNorm1d(width));  // mixt's: its statistics are updated once
    dropout = register_module("dropout", torch::nn::Dropout(0.1));
  }
  at::Tensor forward(const at::Tensor& x) { return x + dropout->forward(norm->forward(linear->forward(x)).relu()); }

 private:
  torch::nn::Linear linear{nullptr};
  mixt::BatchNorm1d norm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(ResidualBlock);

class ResidualMlp : public mixt::Model {
 public:
  ResidualMlp(std::int64_t inputs, std::int64_t width, std::int64_t blocks, std::int64_t classes, bool recompute_stem)
      : recompute_stem_(recompute_stem) {
    stem_ = register_module("stem", torch::nn::Linear(inputs, width));
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < blocks; ++i) blocks_->push_back(ResidualBlock(width));
    head_ = register_module("head", torch::nn::Linear(width, classes));
  }

  at::Tensor forward(const at::Tensor& input) override {
    // The lambdas are kept for the backward pass: they capture `this` or a block's pointer,
    // never a local of this function.
    const auto stem = [this](const at::Tensor& x) { return stem_->forward(x.flatten(1)).relu(); };
    at::Tensor x = recompute_stem_ ? mixt::recompute_in_backward(stem, input) : stem(input);
    for (std::size_t i = 0; i < blocks_->size(); ++i) {
      x = mixt::call_block(*this, "blocks." + std::to_string(i), x,
                           [block = blocks_->ptr<ResidualBlockImpl>(i)](const at::Tensor& in) { return block->forward(in); });
    }
    return mixt::call_submodule(*this, "head", x, [this](const at::Tensor& in) { return head_->forward(in); });
  }

 private:
  bool recompute_stem_;
  torch::nn::Linear stem_{nullptr}, head_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
};

// The recipe's `model:` section: each field's initialiser is its default.
struct ResidualMlpOptions {
  std::int64_t width = 256;
  std::int64_t blocks = 4;
  bool recompute_stem = false;
};

using O = ResidualMlpOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::width, "width", "features of every block", mixt::at_least(1))
        .add(&O::blocks, "blocks", "residual blocks", mixt::at_least(1))
        .add(&O::recompute_stem, "recompute_stem",
             "recompute the first layer in the backward pass (mixt::recompute_in_backward)");

void register_components(mixt::Registrar& r) {
  r.add_model("residual_mlp", "an MLP of residual blocks, each routed for activation checkpointing", kOptions,
              [](const O& o, const mixt::ModelContext& context) -> std::shared_ptr<mixt::Model> {
                std::int64_t inputs = 1;
                for (const std::int64_t d : context.sample_shape) inputs *= d;
                return std::make_shared<ResidualMlp>(inputs, o.width, o.blocks, context.num_classes, o.recompute_stem);
              });
}

}  // namespace

MIXT_PLUGIN("residual_mlp", "1.0.0", register_components)
