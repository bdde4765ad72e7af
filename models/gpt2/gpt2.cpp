// models/gpt2 — GPT-2 (Radford et al. 2019) as Hugging Face transformers builds it
// (transformers/models/gpt2/modeling_gpt2.py, GPT2LMHeadModel): the same module tree, so the
// same state_dict names and layouts:
//
//   transformer.wte.weight                  [vocab, width]     token embedding (tied to the head)
//   transformer.wpe.weight                  [context, width]   learned positions
//   transformer.h.N.ln_1.{weight,bias}
//   transformer.h.N.attn.c_attn.weight      [width, 3 width]   Conv1D: stored [in, out]
//   transformer.h.N.attn.c_attn.bias        [3 width]
//   transformer.h.N.attn.c_proj.{weight,bias}   [width, width], [width]
//   transformer.h.N.ln_2.{weight,bias}
//   transformer.h.N.mlp.c_fc.{weight,bias}      [width, mlp], [mlp]
//   transformer.h.N.mlp.c_proj.{weight,bias}    [mlp, width], [width]
//   transformer.ln_f.{weight,bias}
//
// transformers' Conv1D keeps its weight transposed against nn.Linear ([in, out], forward
// x @ W + b). mixt keeps it that way too, so checkpoints, `mixt export --format safetensors`
// and `model.weights` hold transformers' tensors unchanged and nothing converts; the layer
// hands the linear-map seam (mixt/helpers/linear.h) the transposed view, [out, in], so
// float8 policies, `mixt check`'s FLOP count and precision.fp32_modules see an ordinary
// linear layer. The head, lm_head, is tied to transformer.wte.weight and owns no tensor:
// its weight is not in the state_dict, as transformers' save_pretrained leaves it out of its
// safetensors (transformers ties it again on loading).
//
// Input: token ids, int64 (or int32) [batch, time], time <= context_length. Output: logits
// [batch, time, vocab_size]. Attention is at::scaled_dot_product_attention with is_causal
// (flash attention on CUDA for float16/bfloat16). For generation it decodes with a KV cache
// (mixt/cached_decoding.h): each block keeps its keys and values, so a new token costs one
// position's arithmetic.
#include <mixt/cached_decoding.h>
#include <mixt/helpers/fp32_modules.h>
#include <mixt/helpers/linear.h>
#include <mixt/linear_head.h>
#include <mixt/model.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../common/language_model.h"
#include "../common/zoo.h"

namespace {

// The recipe's `model:` section; the defaults are GPT-2 small's (the 124M "gpt2").
struct Gpt2Options {
  std::optional<std::int64_t> vocab_size;  // empty: the data's vocabulary (ModelContext::num_classes), else 50257
  std::int64_t context_length = 1024, num_layers = 12, num_heads = 12, hidden_dim = 768;
  std::optional<std::int64_t> mlp_dim;  // empty: 4 x hidden_dim
  double dropout = 0.1, attention_dropout = 0.1, layer_norm_eps = 1e-5;
  mixt::RecipeSection where;

  std::int64_t mlp_width() const { return mlp_dim.value_or(4 * hidden_dim); }
  std::int64_t vocab() const { return vocab_size.value_or(50257); }
};

// The published sizes (transformers' gpt2, gpt2-medium, gpt2-large, gpt2-xl configs).
struct Variant {
  const char* name;
  const char* title;
  std::int64_t num_layers, num_heads, hidden_dim;
  std::int64_t params;  // at vocab 50257 and context 1024, the head tied
};
constexpr Variant kVariants[] = {
    {"gpt2", "GPT-2 small", 12, 12, 768, 124439808},
    {"gpt2_medium", "GPT-2 medium", 24, 16, 1024, 354823168},
    {"gpt2_large", "GPT-2 large", 36, 20, 1280, 774030080},
    {"gpt2_xl", "GPT-2 XL", 48, 25, 1600, 1557611200},
};

// transformers.pytorch_utils.Conv1D: weight [in, out], bias [out], forward x @ W + b. It
// computes through LinearMaps::linear with the weight's transpose, a view, so a policy's
// LinearFunction sees nn.Linear's [out, in] weight and its gradient reaches the parameter.
class Conv1DImpl : public torch::nn::Module, public mixt::LinearMaps {
 public:
  // transformers' argument order: Conv1D(nf = out, nx = in); its init (normal 0.02, zero bias).
  Conv1DImpl(std::int64_t out, std::int64_t in, double std) {
    weight = register_parameter("weight", at::empty({in, out}).normal_(0.0, std));
    bias = register_parameter("bias", at::zeros({out}));
  }
  at::Tensor forward(const at::Tensor& x) { return linear("", x, weight.t(), bias); }
  std::vector<Map> linear_maps() const override { return {{"", weight.t(), bias}}; }
  at::Tensor weight, bias;
};
TORCH_MODULE(Conv1D);

torch::nn::LayerNorm layer_norm(const Gpt2Options& o) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.hidden_dim}).eps(o.layer_norm_eps));
}

// transformers' init: normal(0, 0.02) everywhere, the two projections onto the residual
// stream (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2 x layers).
constexpr double kInitStd = 0.02;
double residual_std(const Gpt2Options& o) { return kInitStd / std::sqrt(2.0 * static_cast<double>(o.num_layers)); }

// GPT2Attention (self-attention, causal): c_attn makes q, k and v, heads of width/heads.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const Gpt2Options& o) : heads_(o.num_heads), dropout_(o.attention_dropout) {
    c_attn = register_module("c_attn", Conv1D(3 * o.hidden_dim, o.hidden_dim, kInitStd));
    c_proj = register_module("c_proj", Conv1D(o.hidden_dim, o.hidden_dim, residual_std(o)));
    resid_dropout = register_module("resid_dropout", torch::nn::Dropout(o.dropout));
  }
  // No size of x is read into a shape: a traced forward (mixt export) keeps batch and time symbolic.
  at::Tensor forward(const at::Tensor& x) {  // x: N x T x E
    auto qkv = c_attn->forward(x).chunk(3, -1);
    auto split = [&](const at::Tensor& t) { return t.unflatten(-1, {heads_, -1}).transpose(1, 2); };
    // The default scale, 1/sqrt(head width): transformers' scale_attn_weights.
    at::Tensor y = at::scaled_dot_product_attention(split(qkv[0]), split(qkv[1]), split(qkv[2]), /*attn_mask=*/{},
                                                    is_training() ? dropout_ : 0.0, /*is_causal=*/true);
    return resid_dropout->forward(c_proj->forward(y.transpose(1, 2).flatten(2)));
  }
  // The new positions of x (N x new x E) after the `past` ones whose keys and values `k`
  // and `v` hold (N x heads x past x width/heads, undefined for none); appends theirs.
  at::Tensor decode(const at::Tensor& x, at::Tensor& k, at::Tensor& v) {
    auto qkv = c_attn->forward(x).chunk(3, -1);
    auto split = [&](const at::Tensor& t) { return t.unflatten(-1, {heads_, -1}).transpose(1, 2); };
    const at::Tensor q = split(qkv[0]);
    k = k.defined() ? at::cat({k, split(qkv[1])}, 2) : split(qkv[1]);
    v = v.defined() ? at::cat({v, split(qkv[2])}, 2) : split(qkv[2]);
    const std::int64_t fresh = q.size(2), past = k.size(2) - fresh;
    at::Tensor y;
    if (past == 0 || fresh == 1) {
      // SDPA's is_causal aligns its mask top-left: right only without a past; one new
      // position sees every key.
      y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/past == 0);
    } else {
      const at::Tensor sees = at::ones({fresh, past + fresh}, q.options().dtype(at::kBool)).tril(past);
      y = at::scaled_dot_product_attention(q, k, v, sees);
    }
    return c_proj->forward(y.transpose(1, 2).flatten(2));
  }
  Conv1D c_attn{nullptr}, c_proj{nullptr};
  torch::nn::Dropout resid_dropout{nullptr};

 private:
  std::int64_t heads_;
  double dropout_;
};
TORCH_MODULE(Attention);

// GPT2MLP: c_fc, GELU with the tanh approximation (transformers' "gelu_new"), c_proj, dropout.
class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const Gpt2Options& o) {
    c_fc = register_module("c_fc", Conv1D(o.mlp_width(), o.hidden_dim, kInitStd));
    c_proj = register_module("c_proj", Conv1D(o.hidden_dim, o.mlp_width(), residual_std(o)));
    dropout = register_module("dropout", torch::nn::Dropout(o.dropout));
  }
  at::Tensor forward(const at::Tensor& x) {
    return dropout->forward(c_proj->forward(at::gelu(c_fc->forward(x), "tanh")));
  }
  Conv1D c_fc{nullptr}, c_proj{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Mlp);

// GPT2Block: pre-LayerNorm residual attention, then pre-LayerNorm residual MLP.
class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const Gpt2Options& o) {
    ln_1 = register_module("ln_1", layer_norm(o));
    attn = register_module("attn", Attention(o));
    ln_2 = register_module("ln_2", layer_norm(o));
    mlp = register_module("mlp", Mlp(o));
  }
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = input + attn->forward(ln_1->forward(input));
    return x + mlp->forward(ln_2->forward(x));
  }
  at::Tensor decode(const at::Tensor& input, at::Tensor& k, at::Tensor& v) {
    at::Tensor x = input + attn->decode(ln_1->forward(input), k, v);
    return x + mlp->forward(ln_2->forward(x));
  }
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

// GPT2Model: embeddings, the blocks transformer.h.0 ... and the final LayerNorm.
class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const Gpt2Options& o) {
    wte = register_module("wte", torch::nn::Embedding(o.vocab(), o.hidden_dim));
    wpe = register_module("wpe", torch::nn::Embedding(o.context_length, o.hidden_dim));
    drop = register_module("drop", torch::nn::Dropout(o.dropout));
    auto h = register_module("h", std::make_shared<torch::nn::Module>());
    for (std::int64_t i = 0; i < o.num_layers; ++i) {
      blocks_.push_back(h->register_module(std::to_string(i), Block(o)));
      names_.push_back("transformer.h." + std::to_string(i));
    }
    ln_f = register_module("ln_f", layer_norm(o));
    at::NoGradGuard no_grad;
    torch::nn::init::normal_(wte->weight, 0.0, kInitStd);
    torch::nn::init::normal_(wpe->weight, 0.0, kInitStd);
  }

  // `model`: the GPT2LMHeadModel, whose routing (fp32_modules, activation checkpointing)
  // names each block "transformer.h.N" and the final norm "transformer.ln_f".
  at::Tensor forward(const at::Tensor& ids, const torch::nn::Module& model) {
    // Positions 0 .. T-1 counted from the ids rather than at::arange(ids.size(1)), so that a
    // traced forward keeps the sequence length symbolic.
    const at::Tensor positions = at::ones_like(ids.select(0, 0), ids.options().dtype(at::kLong)).cumsum(0) - 1;
    at::Tensor x = drop->forward(wte->forward(ids) + wpe->forward(positions));
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      x = mixt::call_block(model, names_[i], x,
                           [block = &blocks_[i]](const at::Tensor& in) { return (*block)->forward(in); });
    }
    return mixt::call_submodule(model, "transformer.ln_f", x,
                                [norm = &ln_f](const at::Tensor& in) { return (*norm)->forward(in); });
  }

  // Positions past .. past+new-1 of `ids` (N x new) through every block's decode, `keys` and
  // `values` holding each block's cache (grown here). Eval mode: no dropout; routed under the
  // names forward() routes, so precision.fp32_modules computes the same in both.
  at::Tensor decode(const at::Tensor& ids, std::int64_t past, std::vector<at::Tensor>& keys,
                    std::vector<at::Tensor>& values, const torch::nn::Module& model) {
    keys.resize(blocks_.size());
    values.resize(blocks_.size());
    const at::Tensor positions = at::arange(past, past + ids.size(1), ids.options().dtype(at::kLong));
    at::Tensor x = wte->forward(ids) + wpe->forward(positions);
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      x = mixt::call_submodule(model, names_[i], x,
                               [block = &blocks_[i], k = &keys[i], v = &values[i]](const at::Tensor& in) {
                                 return (*block)->decode(in, *k, *v);
                               });
    }
    return mixt::call_submodule(model, "transformer.ln_f", x,
                                [norm = &ln_f](const at::Tensor& in) { return (*norm)->forward(in); });
  }

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};

 private:
  std::vector<Block> blocks_;
  std::vector<std::string> names_;
};
TORCH_MODULE(Transformer);

// The head (tied to transformer.wte) is offered to the task (mixt/linear_head.h): causal_lm
// then trains without the whole logits.
class Gpt2LMHeadModel : public mixt::Model, public mixt::CachedDecoding, public mixt::LinearHead {
 public:
  explicit Gpt2LMHeadModel(const Gpt2Options& o) : context_(o.context_length) {
    transformer_ = register_module("transformer", Transformer(o));
    lm_head_ = register_module("lm_head", mixt::models::TiedLmHead(transformer_->wte));
  }

  at::Tensor forward(const at::Tensor& ids) override {
    return mixt::call_submodule(*this, "lm_head", features(ids),
                                [this](const at::Tensor& in) { return lm_head_->forward(in); });
  }
  at::Tensor features(const at::Tensor& ids) override {
    TORCH_CHECK(ids.dim() == 2 && (ids.scalar_type() == at::kLong || ids.scalar_type() == at::kInt),
                "gpt2: expected token ids, int64 [batch, time], got ", ids.scalar_type(), " of shape ", ids.sizes());
    TORCH_CHECK(ids.size(1) <= context_, "gpt2: ", ids.size(1), " tokens, more than context_length ", context_);
    return mixt::call_submodule(*this, "transformer", ids,
                                [this](const at::Tensor& in) { return transformer_->forward(in, *this); });
  }
  mixt::HeadMap head() const override { return {"lm_head", lm_head_->weight(), {}}; }

  std::int64_t context_length() const override { return context_; }
  void clear_cache() override {
    keys_.clear();
    values_.clear();
    past_ = 0;
  }
  at::Tensor decode(const at::Tensor& ids) override {
    TORCH_CHECK(ids.dim() == 2, "gpt2: expected token ids [batch, new], got shape ", ids.sizes());
    TORCH_CHECK(past_ + ids.size(1) <= context_, "gpt2: ", past_ + ids.size(1),
                " tokens decoded, more than context_length ", context_, "; clear the cache and decode the last ",
                context_, " again");
    const at::Tensor h = mixt::call_submodule(*this, "transformer", ids, [this](const at::Tensor& in) {
      return transformer_->decode(in, past_, keys_, values_, *this);
    });
    const at::Tensor logits =
        mixt::call_submodule(*this, "lm_head", h, [this](const at::Tensor& in) { return lm_head_->forward(in); });
    past_ += ids.size(1);
    return logits;
  }

 private:
  std::int64_t context_;
  std::vector<at::Tensor> keys_, values_;  // per block: N x heads x past x head width
  std::int64_t past_ = 0;
  Transformer transformer_{nullptr};
  mixt::models::TiedLmHead lm_head_{nullptr};
};

std::string summary(const Variant& v) {
  return std::string(v.title) + ": " + mixt::models::with_thousands(v.params) + " params, " +
         std::to_string(v.num_layers) + " layers, width " + std::to_string(v.hidden_dim) + ", " +
         std::to_string(v.num_heads) + " heads, context 1024 (Hugging Face GPT2LMHeadModel)";
}

// transformers' GPT2Config: the keys that size the model, and those whose other values would
// make a different model than this one computes.
mixt::TransformersConfig transformers_config() {
  mixt::TransformersConfig config;
  config.model_types = {"gpt2"};
  config.options = {{"vocab_size", "vocab_size"},
                    {"n_positions", "context_length"},
                    {"n_layer", "num_layers"},
                    {"n_head", "num_heads"},
                    {"n_embd", "hidden_dim"},
                    {"n_inner", "mlp_dim"},
                    {"resid_pdrop", "dropout"},
                    {"attn_pdrop", "attention_dropout"},
                    {"layer_norm_epsilon", "layer_norm_eps"}};
  config.implements = {{"activation_function", "\"gelu_new\""},
                       {"scale_attn_weights", "true"},
                       {"scale_attn_by_inverse_layer_idx", "false"},
                       {"reorder_and_upcast_attn", "false"},
                       {"tie_word_embeddings", "true"},
                       {"add_cross_attention", "false"}};
  return config;
}

// GPT2Config's defaults for the keys a config.json may omit (a preset's sizes would stand in
// otherwise: gpt2_medium's 24 layers for a file without n_layer). n_inner has none here: the
// option's own default is GPT2Config's (4 x n_embd).
mixt::TransformersDefaults transformers_defaults() {
  mixt::TransformersDefaults defaults;
  defaults.config_class = "GPT2Config";
  defaults.values = {
      {"vocab_size", "50257"}, {"n_positions", "1024"}, {"n_layer", "12"},     {"n_head", "12"},
      {"n_embd", "768"},       {"resid_pdrop", "0.1"},  {"attn_pdrop", "0.1"}, {"layer_norm_epsilon", "1e-05"}};
  return defaults;
}

void register_components(mixt::Registrar& r) {
  using O = Gpt2Options;
  for (const Variant& v : kVariants) {
    O defaults;
    defaults.num_layers = v.num_layers;
    defaults.num_heads = v.num_heads;
    defaults.hidden_dim = v.hidden_dim;
    const auto options =
        mixt::OptionsOf<O>(defaults)
            .contextual(&O::vocab_size, "vocab_size", "the data's vocabulary, else 50257",
                        "token ids 0 .. vocab_size-1; the logits' last dimension", mixt::models::vocabulary_size())
            .add(&O::context_length, "context_length", "longest sequence (rows of the position embedding)",
                 mixt::at_least(1))
            .add(&O::num_layers, "num_layers", "transformer blocks", mixt::at_least(1))
            .add(&O::num_heads, "num_heads", "attention heads", mixt::at_least(1))
            .add(&O::hidden_dim, "hidden_dim", "embedding width", mixt::at_least(1))
            .contextual(&O::mlp_dim, "mlp_dim", "4 x hidden_dim", "MLP hidden width", mixt::at_least(1))
            .add(&O::dropout, "dropout", "dropout on the embeddings and the residual branches",
                 mixt::models::probability())
            .add(&O::attention_dropout, "attention_dropout", "dropout on attention weights",
                 mixt::models::probability())
            .add(&O::layer_norm_eps, "layer_norm_eps", "LayerNorm epsilon", mixt::above(0))
            .rule("num_heads",
                  [](const O& o) -> std::optional<std::string> {
                    if (o.hidden_dim % o.num_heads != 0) return "must divide hidden_dim";
                    return std::nullopt;
                  })
            .recipe_section(&O::where);
    r.add_model(v.name, summary(v), options,
                [](const O& o, const mixt::ModelContext& context) -> std::shared_ptr<mixt::Model> {
                  mixt::models::require_token_sequences(o.where, context, o.context_length, "gpt2");
                  O resolved = o;
                  if (!resolved.vocab_size && context.num_classes > 0) resolved.vocab_size = context.num_classes;
                  return std::make_shared<Gpt2LMHeadModel>(resolved);
                });
    r.read_transformers_config(v.name, transformers_config());
    r.read_transformers_defaults(v.name, transformers_defaults());
  }
}

}  // namespace

MIXT_PLUGIN("gpt2", "1.0.0", register_components)
