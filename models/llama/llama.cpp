// models/llama — Llama-family decoder-only language models (Llama 2 and 3, SmolLM, TinyLlama,
// and the many models of the same shape) as Hugging Face transformers builds them
// (transformers/models/llama/modeling_llama.py, LlamaForCausalLM): the same module tree, so
// the same state_dict names and layouts:
//
//   model.embed_tokens.weight                        [vocab, width]
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight   q, o: heads x head_dim; k, v: kv_heads x head_dim
//   model.layers.N.self_attn.{q,k,v,o}_proj.bias     with attention_bias only
//   model.layers.N.mlp.{gate,up,down}_proj.weight    SwiGLU, hidden mlp_dim (biases with mlp_bias)
//   model.layers.N.input_layernorm.weight            RMSNorm
//   model.layers.N.post_attention_layernorm.weight
//   model.norm.weight
//   lm_head.weight                                   [vocab, width]; absent when tied to embed_tokens
//
// Rotary positions (rope_theta; Llama 3.1's llama3 frequency scaling) are computed from the
// positions at each call, not stored: nothing of them is in the state_dict, as
// transformers keeps its inv_freq out of it.
//
// Input: token ids, int64 (or int32) [batch, time], time <= context_length. Output: logits
// [batch, time, vocab]. Attention is at::scaled_dot_product_attention, causal, with
// enable_gqa when k and v have fewer heads than q (what transformers' sdpa path calls).
// Routed: "model", each "model.layers.N" (a block: activation checkpointing),
// "model.norm", "lm_head". Generation decodes with a KV cache (mixt/cached_decoding.h), and
// causal_lm trains with the head fused into its loss (mixt/linear_head.h). Packed rows
// (mixt/packed_sequences.h) attend inside each sequence, with its own rotary positions.
#include <mixt/cached_decoding.h>
#include <mixt/helpers/fp32_modules.h>
#include <mixt/linear_head.h>
#include <mixt/model.h>
#include <mixt/options.h>
#include <mixt/packed_sequences.h>
#include <mixt/plugin.h>
#include <torch/nn/modules/embedding.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../common/language_model.h"
#include "../common/zoo.h"
#include "llama_layers.h"
#include "rope.h"
#include "transformers_mapping.h"

namespace {

using mixt::models::llama::DecoderLayer;
using mixt::models::llama::LayerShape;
using mixt::models::llama::RmsNorm;
using mixt::models::llama::RopeOptions;

// The recipe's `model:` section; the defaults are the preset's.
struct LlamaOptions {
  std::optional<std::int64_t> vocab_size;  // empty: the data's vocabulary, else the preset's
  std::int64_t vocab_default = 32000;      // the preset's, not an option
  std::int64_t context_length = 2048, num_layers = 22, num_heads = 32, hidden_dim = 2048, mlp_dim = 5632;
  std::optional<std::int64_t> num_kv_heads, head_dim;
  double rms_norm_eps = 1e-5, attention_dropout = 0.0, init_std = 0.02;
  bool tie_embeddings = false, attention_bias = false, mlp_bias = false;
  RopeOptions rope;
  mixt::RecipeSection where;

  std::int64_t vocab() const { return vocab_size.value_or(vocab_default); }
  std::int64_t kv_heads() const { return num_kv_heads.value_or(num_heads); }
  std::int64_t head_width() const { return head_dim.value_or(hidden_dim / num_heads); }
  LayerShape layer_shape() const {
    return {hidden_dim,   mlp_dim,           num_heads, kv_heads(),     head_width(),
            rms_norm_eps, attention_dropout, init_std,  attention_bias, mlp_bias};
  }
};

// LlamaModel: the embedding, the decoder layers model.layers.0 ... and the final norm.
class DecoderImpl : public torch::nn::Module {
 public:
  explicit DecoderImpl(const LlamaOptions& o)
      : inverse_frequencies_(mixt::models::llama::inverse_frequencies(o.head_width(), o.rope)) {
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(o.vocab(), o.hidden_dim));
    {
      at::NoGradGuard no_grad;
      embed_tokens->weight.normal_(0.0, o.init_std);
    }
    auto layers = register_module("layers", std::make_shared<torch::nn::Module>());
    for (std::int64_t i = 0; i < o.num_layers; ++i) {
      layers_.push_back(layers->register_module(std::to_string(i), DecoderLayer(o.layer_shape())));
      names_.push_back("model.layers." + std::to_string(i));
    }
    norm = register_module("norm", RmsNorm(o.hidden_dim, o.rms_norm_eps));
  }

  // `model`: the LlamaForCausalLM, whose routing names each layer and the final norm.
  // `packed_positions`: undefined, or each token's position within its own sequence [batch,
  // time] (mixt/packed_sequences.h): rotary positions from them, and attention inside each
  // sequence (a block-diagonal causal mask: a sequence starts where its position is 0), as
  // transformers' LlamaForCausalLM attends given position_ids and such a 4-D mask.
  at::Tensor forward(const at::Tensor& ids, const torch::nn::Module& model, const at::Tensor& packed_positions = {}) {
    // Positions counted from the ids rather than at::arange(ids.size(1)), so that a traced
    // forward keeps the sequence length symbolic.
    const at::Tensor positions = packed_positions.defined()
                                     ? packed_positions.to(at::kLong)
                                     : at::ones_like(ids.select(0, 0), ids.options().dtype(at::kLong)).cumsum(0) - 1;
    at::Tensor x = embed_tokens->forward(ids);
    auto [cos, sin] = mixt::models::llama::rope_tables(positions, inverse_frequencies_, x.scalar_type());
    at::Tensor mask;
    if (packed_positions.defined()) {
      cos = cos.unsqueeze(1);  // [batch, 1, time, head_dim]: each row its own positions, for every head
      sin = sin.unsqueeze(1);
      const at::Tensor sequence = positions.eq(0).cumsum(1);  // [batch, time]: which sequence each token is in
      const at::Tensor same = sequence.unsqueeze(2).eq(sequence.unsqueeze(1));
      mask = same.logical_and(at::ones_like(same).tril()).unsqueeze(1);  // [batch, 1, query, key]
    }
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      x = mixt::call_block(model, names_[i], x,
                           [layer = &layers_[i], cos = cos, sin = sin, mask = mask](const at::Tensor& in) {
                             return (*layer)->forward(in, cos, sin, mask);
                           });
    }
    return mixt::call_submodule(model, "model.norm", x,
                                [n = &norm](const at::Tensor& in) { return (*n)->forward(in); });
  }

  // Positions past .. past+new-1 of `ids` through every layer's decode, `keys` and `values`
  // holding each layer's cache (grown here); routed as forward() routes.
  at::Tensor decode(const at::Tensor& ids, std::int64_t past, std::vector<at::Tensor>& keys,
                    std::vector<at::Tensor>& values, const torch::nn::Module& model) {
    keys.resize(layers_.size());
    values.resize(layers_.size());
    const at::Tensor positions = at::arange(past, past + ids.size(1), ids.options().dtype(at::kLong));
    at::Tensor x = embed_tokens->forward(ids);
    const auto [cos, sin] = mixt::models::llama::rope_tables(positions, inverse_frequencies_, x.scalar_type());
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      x = mixt::call_submodule(model, names_[i], x,
                               [layer = &layers_[i], cos = cos, sin = sin, k = &keys[i], v = &values[i]](
                                   const at::Tensor& in) { return (*layer)->decode(in, cos, sin, *k, *v); });
    }
    return mixt::call_submodule(model, "model.norm", x,
                                [n = &norm](const at::Tensor& in) { return (*n)->forward(in); });
  }

  torch::nn::Embedding embed_tokens{nullptr};
  RmsNorm norm{nullptr};

 private:
  at::Tensor inverse_frequencies_;  // float32, not a buffer: transformers' inv_freq is not saved
  std::vector<DecoderLayer> layers_;
  std::vector<std::string> names_;
};
TORCH_MODULE(Decoder);

class LlamaForCausalLM : public mixt::Model,
                         public mixt::CachedDecoding,
                         public mixt::LinearHead,
                         public mixt::PackedModel {
 public:
  explicit LlamaForCausalLM(const LlamaOptions& o) : context_(o.context_length) {
    model_ = register_module("model", Decoder(o));
    if (o.tie_embeddings) {
      tied_head_ = register_module("lm_head", mixt::models::TiedLmHead(model_->embed_tokens));
    } else {
      head_ = register_module("lm_head", mixt::models::llama::linear_layer(o.hidden_dim, o.vocab(), false, o.init_std));
    }
  }

  at::Tensor forward(const at::Tensor& ids) override { return logits(features(ids)); }
  at::Tensor features(const at::Tensor& ids) override { return features_packed(ids, {}); }
  at::Tensor forward_packed(const at::Tensor& ids, const at::Tensor& positions) override {
    return logits(features_packed(ids, positions));
  }
  at::Tensor features_packed(const at::Tensor& ids, const at::Tensor& positions) override {
    TORCH_CHECK(ids.dim() == 2 && (ids.scalar_type() == at::kLong || ids.scalar_type() == at::kInt),
                "llama: expected token ids, int64 [batch, time], got ", ids.scalar_type(), " of shape ", ids.sizes());
    TORCH_CHECK(ids.size(1) <= context_, "llama: ", ids.size(1), " tokens, more than context_length ", context_);
    TORCH_CHECK(!positions.defined() || positions.sizes() == ids.sizes(), "llama: positions of shape ",
                positions.sizes(), " for token ids of shape ", ids.sizes());
    return mixt::call_submodule(
        *this, "model", ids, [this, positions](const at::Tensor& in) { return model_->forward(in, *this, positions); });
  }
  mixt::HeadMap head() const override { return {"lm_head", tied_head_ ? tied_head_->weight() : head_->weight, {}}; }

  std::int64_t context_length() const override { return context_; }
  void clear_cache() override {
    keys_.clear();
    values_.clear();
    past_ = 0;
  }
  at::Tensor decode(const at::Tensor& ids) override {
    TORCH_CHECK(ids.dim() == 2, "llama: expected token ids [batch, new], got shape ", ids.sizes());
    TORCH_CHECK(past_ + ids.size(1) <= context_, "llama: ", past_ + ids.size(1),
                " tokens decoded, more than context_length ", context_, "; clear the cache and decode the last ",
                context_, " again");
    const at::Tensor h = mixt::call_submodule(
        *this, "model", ids, [this](const at::Tensor& in) { return model_->decode(in, past_, keys_, values_, *this); });
    past_ += ids.size(1);
    return logits(h);
  }

 private:
  at::Tensor logits(const at::Tensor& h) {
    return mixt::call_submodule(*this, "lm_head", h, [this](const at::Tensor& in) {
      return tied_head_ ? tied_head_->forward(in) : head_->forward(in);
    });
  }

  std::int64_t context_;
  std::vector<at::Tensor> keys_, values_;  // per layer: [batch, kv_heads, past, head_dim]
  std::int64_t past_ = 0;
  Decoder model_{nullptr};
  mixt::models::TiedLmHead tied_head_{nullptr};
  mixt::Linear head_{nullptr};
};

// Real shapes (their config.json on the Hugging Face hub), nothing downloaded.
struct Preset {
  const char* name;
  const char* title;
  std::int64_t hidden, mlp, layers, heads, kv_heads, vocab, context;
  double theta;
  bool tied;
  bool llama3_rope;  // Llama 3.2's rope_scaling: llama3, factor 32, 1, 4, original 8192
  std::int64_t params;
};
constexpr Preset kPresets[] = {
    {"llama", "Llama (sizes as options; defaults SmolLM2-135M's)", 576, 1536, 30, 9, 3, 49152, 8192, 100000.0, true,
     false, 134515008},
    {"smollm2_135m", "SmolLM2-135M", 576, 1536, 30, 9, 3, 49152, 8192, 100000.0, true, false, 134515008},
    {"tinyllama_1_1b", "TinyLlama-1.1B", 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0, false, false, 1100048384},
    {"llama3_2_1b", "Llama-3.2-1B", 2048, 8192, 16, 32, 8, 128256, 131072, 500000.0, true, true, 1235814400},
};

std::string summary(const Preset& p) {
  return std::string(p.title) + ": " + mixt::models::with_thousands(p.params) + " params, " + std::to_string(p.layers) +
         " layers, width " + std::to_string(p.hidden) + ", " + std::to_string(p.heads) + " heads (" +
         std::to_string(p.kv_heads) + " kv), vocab " + std::to_string(p.vocab) + (p.tied ? ", tied head" : "") +
         " (Hugging Face LlamaForCausalLM)";
}

mixt::OptionsOf<RopeOptions> rope_options(const RopeOptions& defaults) {
  using R = RopeOptions;
  return mixt::OptionsOf<R>(defaults)
      .add(&R::theta, "rope_theta", "base of the rotary wavelengths", mixt::above(0))
      .choice(&R::type, "rope_type", {{"default", "default"}, {"llama3", "llama3"}},
              "rotary frequencies: default, or llama3 (Llama 3.1's scaling, the rope_* options below)")
      .add(&R::factor, "rope_factor", "llama3: long wavelengths divided by it", mixt::above(0))
      .add(&R::low_freq_factor, "rope_low_freq_factor", "llama3: low_freq_factor", mixt::above(0))
      .add(&R::high_freq_factor, "rope_high_freq_factor", "llama3: high_freq_factor", mixt::above(0))
      .add(&R::original_context, "rope_original_context", "llama3: original_max_position_embeddings",
           mixt::at_least(1));
}

void register_components(mixt::Registrar& r) {
  using O = LlamaOptions;
  for (const Preset& p : kPresets) {
    O d;
    d.hidden_dim = p.hidden;
    d.mlp_dim = p.mlp;
    d.num_layers = p.layers;
    d.num_heads = p.heads;
    d.num_kv_heads = p.kv_heads;
    d.vocab_default = p.vocab;
    d.context_length = p.context;
    d.rope.theta = p.theta;
    d.tie_embeddings = p.tied;
    if (p.llama3_rope) {
      d.rope.type = "llama3";
      d.rope.factor = 32.0;
    }
    const std::string vocab_words = "the data's vocabulary, else " + std::to_string(p.vocab);
    const std::string kv_words = std::to_string(p.kv_heads);
    const auto options =
        mixt::OptionsOf<O>(d)
            .contextual(&O::vocab_size, "vocab_size", vocab_words,
                        "token ids 0 .. vocab_size-1; the logits' last dimension", mixt::models::vocabulary_size())
            .add(&O::context_length, "context_length", "longest sequence (max_position_embeddings)", mixt::at_least(1))
            .add(&O::num_layers, "num_layers", "decoder layers", mixt::at_least(1))
            .add(&O::num_heads, "num_heads", "query heads", mixt::at_least(1))
            .contextual(&O::num_kv_heads, "num_kv_heads", kv_words,
                        "key/value heads (grouped-query attention; num_heads: multi-head)", mixt::at_least(1))
            .add(&O::hidden_dim, "hidden_dim", "embedding width", mixt::at_least(1))
            .add(&O::mlp_dim, "mlp_dim", "SwiGLU hidden width (intermediate_size)", mixt::at_least(1))
            .contextual(&O::head_dim, "head_dim", "hidden_dim / num_heads", "width of one attention head",
                        mixt::at_least(2))
            .add(&O::rms_norm_eps, "rms_norm_eps", "RMSNorm epsilon", mixt::above(0))
            .add(&O::attention_dropout, "attention_dropout", "dropout on attention weights",
                 mixt::models::probability())
            .add(&O::init_std, "init_std", "standard deviation of the initial weights (initializer_range)",
                 mixt::above(0))
            .add(&O::tie_embeddings, "tie_embeddings", "lm_head shares embed_tokens' weight (tie_word_embeddings)")
            .add(&O::attention_bias, "attention_bias", "biases on q_proj, k_proj, v_proj and o_proj")
            .add(&O::mlp_bias, "mlp_bias", "biases on gate_proj, up_proj and down_proj")
            .include(&O::rope, rope_options(d.rope))
            .rule("num_kv_heads",
                  [](const O& o) -> std::optional<std::string> {
                    if (o.num_heads % o.kv_heads() != 0) return "must divide num_heads (each serves a group of them)";
                    return std::nullopt;
                  })
            .rule("num_heads",
                  [](const O& o) -> std::optional<std::string> {
                    if (!o.head_dim && o.hidden_dim % o.num_heads != 0)
                      return "must divide hidden_dim, or give head_dim";
                    return std::nullopt;
                  })
            .rule("head_dim",
                  [](const O& o) -> std::optional<std::string> {
                    if (o.head_width() % 2 != 0) return "must be even (rotary positions turn pairs of dimensions)";
                    return std::nullopt;
                  })
            .recipe_section(&O::where);
    r.add_model(p.name, summary(p), options,
                [](const O& o, const mixt::ModelContext& context) -> std::shared_ptr<mixt::Model> {
                  mixt::models::require_token_sequences(o.where, context, o.context_length, "llama");
                  O resolved = o;
                  if (!resolved.vocab_size && context.num_classes > 0) resolved.vocab_size = context.num_classes;
                  return std::make_shared<LlamaForCausalLM>(resolved);
                });
    r.read_transformers_config(p.name, mixt::models::llama::transformers_config());
    r.read_transformers_defaults(p.name, mixt::models::llama::transformers_defaults());
  }
}

}  // namespace

MIXT_PLUGIN("llama", "1.0.0", register_components)
