// models/vit — Vision Transformer (vit_b_16, vit_b_32) as torchvision defines it
// (torchvision/models/vision_transformer.py): "conv_proj", "class_token",
// "encoder.pos_embedding", "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
// "encoder.layers.encoder_layer_0.mlp.0.weight", "encoder.ln.weight", "heads.head.weight".
// The sizes are options (defaults: ViT-B), so the same code also builds small ViTs.
#include <mixt/plugin.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <mixt/helpers/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>

#include "../common/layers.h"
#include "../common/zoo.h"

namespace {

using mixt::models::routed;
using mixt::models::routed_block;
using mixt::models::ZooFacts;

// The recipe's `model:` section; the defaults are ViT-B/16's (vit_b_32 has its own patch_size).
struct VitOptions {
  mixt::models::ZooOptions zoo;
  std::int64_t image_size = 224, patch_size = 16, num_layers = 12, num_heads = 12, hidden_dim = 768, mlp_dim = 3072;
  double dropout = 0.0, attention_dropout = 0.0;
};

torch::nn::LayerNorm layer_norm(std::int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-6));
}

// nn.MultiheadAttention(batch_first=True) with its parameter names: in_proj_weight,
// in_proj_bias (q, k and v stacked) and out_proj. The stacked projection is the linear map
// "in_proj" (mixt/helpers/linear.h), so a precision policy can compute it as it computes
// out_proj.
class SelfAttentionImpl : public torch::nn::Module, public mixt::LinearMaps {
 public:
  SelfAttentionImpl(std::int64_t dim, std::int64_t heads, double dropout) : heads_(heads), dropout_(dropout) {
    in_proj_weight = register_parameter("in_proj_weight", at::empty({3 * dim, dim}));
    in_proj_bias = register_parameter("in_proj_bias", at::zeros({3 * dim}));
    out_proj = register_module("out_proj", mixt::Linear(dim, dim));
    at::NoGradGuard no_grad;
    torch::nn::init::xavier_uniform_(in_proj_weight);
    torch::nn::init::zeros_(out_proj->bias);
  }
  // No size of x is read into a shape: a traced forward (mixt export) keeps the batch symbolic.
  at::Tensor forward(const at::Tensor& x) {  // x: N x L x E
    auto qkv = linear("in_proj", x, in_proj_weight, in_proj_bias).chunk(3, -1);
    auto split = [&](const at::Tensor& t) { return t.unflatten(-1, {heads_, -1}).transpose(1, 2); };
    at::Tensor y = at::scaled_dot_product_attention(split(qkv[0]), split(qkv[1]), split(qkv[2]), {},
                                                    is_training() ? dropout_ : 0.0);
    return out_proj->forward(y.transpose(1, 2).flatten(2));
  }
  std::vector<Map> linear_maps() const override { return {{"in_proj", in_proj_weight, in_proj_bias}}; }
  at::Tensor in_proj_weight, in_proj_bias;
  mixt::Linear out_proj{nullptr};

 private:
  std::int64_t heads_;
  double dropout_;
};

class EncoderBlockImpl : public torch::nn::Module {
 public:
  explicit EncoderBlockImpl(const VitOptions& o) {
    ln_1 = register_module("ln_1", layer_norm(o.hidden_dim));
    self_attention = register_module(
        "self_attention", std::make_shared<SelfAttentionImpl>(o.hidden_dim, o.num_heads, o.attention_dropout));
    dropout = register_module("dropout", torch::nn::Dropout(o.dropout));
    ln_2 = register_module("ln_2", layer_norm(o.hidden_dim));
    // torchvision's MLPBlock: Linear, GELU, Dropout, Linear, Dropout.
    mlp = register_module(
        "mlp", torch::nn::Sequential(mixt::Linear(o.hidden_dim, o.mlp_dim), torch::nn::GELU(),
                                     torch::nn::Dropout(o.dropout), mixt::Linear(o.mlp_dim, o.hidden_dim),
                                     torch::nn::Dropout(o.dropout)));
    at::NoGradGuard no_grad;
    for (auto& module : mlp->modules(/*include_self=*/false)) {
      if (auto* linear = module->as<torch::nn::Linear>()) {
        torch::nn::init::xavier_uniform_(linear->weight);
        torch::nn::init::normal_(linear->bias, 0.0, 1e-6);
      }
    }
  }
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = dropout->forward(self_attention->forward(ln_1->forward(input))) + input;
    return x + mlp->forward(ln_2->forward(x));
  }

 private:
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  std::shared_ptr<SelfAttentionImpl> self_attention;
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Sequential mlp{nullptr};
};

class Encoder : public torch::nn::Module {
 public:
  explicit Encoder(const VitOptions& o) {
    const std::int64_t seq = (o.image_size / o.patch_size) * (o.image_size / o.patch_size) + 1;
    pos_embedding_ = register_parameter("pos_embedding", at::empty({1, seq, o.hidden_dim}).normal_(0.0, 0.02));
    dropout_ = register_module("dropout", torch::nn::Dropout(o.dropout));
    auto layers = register_module("layers", std::make_shared<torch::nn::Module>());
    for (std::int64_t i = 0; i < o.num_layers; ++i) {
      blocks_.push_back(
          layers->register_module("encoder_layer_" + std::to_string(i), std::make_shared<EncoderBlockImpl>(o)));
    }
    ln_ = register_module("ln", layer_norm(o.hidden_dim));
  }
  // `model`: the VisionTransformer, whose fp32_modules may name each encoder layer.
  at::Tensor forward(const at::Tensor& input, const torch::nn::Module& model) {
    at::Tensor x = dropout_->forward(input + pos_embedding_);
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      x = routed_block(model, ("encoder.layers.encoder_layer_" + std::to_string(i)).c_str(), blocks_[i], x);
    }
    return ln_->forward(x);
  }

 private:
  at::Tensor pos_embedding_;
  torch::nn::Dropout dropout_{nullptr};
  std::vector<std::shared_ptr<EncoderBlockImpl>> blocks_;
  torch::nn::LayerNorm ln_{nullptr};
};

class VisionTransformer : public mixt::Model {
 public:
  VisionTransformer(const VitOptions& o, std::int64_t num_classes) : image_size_(o.image_size) {
    conv_proj_ = register_module(
        "conv_proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, o.hidden_dim, o.patch_size).stride(o.patch_size)));
    class_token_ = register_parameter("class_token", at::zeros({1, 1, o.hidden_dim}));
    encoder_ = register_module("encoder", std::make_shared<Encoder>(o));
    auto heads = register_module("heads", std::make_shared<torch::nn::Module>());
    head_ = heads->register_module("head", mixt::Linear(o.hidden_dim, num_classes));

    at::NoGradGuard no_grad;  // torchvision's init (trunc_normal_ at +-2 absolute: a normal draw in practice)
    const double fan_in = 3.0 * static_cast<double>(o.patch_size * o.patch_size);
    torch::nn::init::normal_(conv_proj_->weight, 0.0, std::sqrt(1.0 / fan_in));
    torch::nn::init::zeros_(conv_proj_->bias);
    torch::nn::init::zeros_(head_->weight);
    torch::nn::init::zeros_(head_->bias);
  }

  at::Tensor forward(const at::Tensor& input) override {
    TORCH_CHECK(input.size(2) == image_size_ && input.size(3) == image_size_, "vit: expected ", image_size_, "x",
                image_size_, " images, got ", input.size(2), "x", input.size(3), " (set image_size:)");
    // N x hidden x (H/p * W/p) -> N x patches x hidden; the class token expanded as the
    // first patch is, so that no size of the batch is read into a shape (mixt export).
    at::Tensor x = routed(*this, "conv_proj", conv_proj_, input).flatten(2).permute({0, 2, 1});
    x = at::cat({class_token_.expand_as(x.narrow(1, 0, 1)), x}, 1);
    x = mixt::call_submodule(*this, "encoder", x, [this](const at::Tensor& in) { return encoder_->forward(in, *this); });
    return routed(*this, "heads", head_, x.select(1, 0));
  }

 private:
  std::int64_t image_size_;
  torch::nn::Conv2d conv_proj_{nullptr};
  at::Tensor class_token_;
  std::shared_ptr<Encoder> encoder_;
  mixt::Linear head_{nullptr};
};

void register_components(mixt::Registrar& r) {
  using O = VitOptions;
  for (std::int64_t patch : {16, 32}) {
    const std::string name = "vit_b_" + std::to_string(patch);
    const ZooFacts facts = patch == 16 ? ZooFacts{86567656, 17.564, 224} : ZooFacts{88224232, 4.409, 224};
    O defaults;
    defaults.patch_size = patch;
    const auto options =
        mixt::OptionsOf<O>(defaults)
            .include(&O::zoo, mixt::models::kZooOptions)
            .add(&O::image_size, "image_size", "input height and width (fixes the position embedding)")
            .add(&O::patch_size, "patch_size", "side of the square patches")
            .add(&O::num_layers, "num_layers", "encoder blocks")
            .add(&O::num_heads, "num_heads", "attention heads")
            .add(&O::hidden_dim, "hidden_dim", "embedding width")
            .add(&O::mlp_dim, "mlp_dim", "MLP hidden width")
            .add(&O::dropout, "dropout", "dropout in the encoder")
            .add(&O::attention_dropout, "attention_dropout", "dropout on attention weights")
            .rule("patch_size",
                  [](const O& o) -> std::optional<std::string> {
                    if (o.patch_size < 1 || o.image_size % o.patch_size != 0) return "must divide image_size";
                    return std::nullopt;
                  })
            .rule("num_heads",
                  [](const O& o) -> std::optional<std::string> {
                    if (o.num_heads < 1 || o.hidden_dim % o.num_heads != 0) return "must divide hidden_dim";
                    return std::nullopt;
                  })
            .rule("num_layers", [](const O& o) -> std::optional<std::string> {
              if (o.num_layers < 1 || o.mlp_dim < 1) return "num_layers and mlp_dim must be positive";
              return std::nullopt;
            });
    r.add_model(name, mixt::models::zoo_summary(patch == 16 ? "ViT-B/16" : "ViT-B/32", facts), options,
                [](const O& o, const mixt::ModelContext& context) -> std::shared_ptr<mixt::Model> {
                  mixt::models::require_rgb_images(o.zoo, context);
                  const auto& s = context.sample_shape;
                  if (s.size() == 3 && (s[1] != o.image_size || s[2] != o.image_size)) {
                    o.zoo.where.fail("image_size",
                                     "the data delivers " + std::to_string(s[1]) + "x" + std::to_string(s[2]) +
                                         " images but this ViT is built for " + std::to_string(o.image_size),
                                     "set image_size: to the data's size");
                  }
                  return std::make_shared<VisionTransformer>(o, o.zoo.classes(context));
                });
  }
}

}  // namespace

MIXT_PLUGIN("vit", "1.0.0", register_components)
