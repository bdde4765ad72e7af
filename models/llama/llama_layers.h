// The layers of transformers' LlamaForCausalLM (modeling_llama.py), with its module names
// and arithmetic: RMSNorm, grouped-query attention with rotary positions, the SwiGLU MLP and
// the pre-norm decoder layer. Every linear map is a mixt::Linear, so precision policies
// (float8) and `mixt check`'s FLOP count see them.
#pragma once

#include <mixt/helpers/linear.h>
#include <torch/nn/module.h>

#include <cmath>
#include <cstdint>
#include <optional>

#include "rope.h"

namespace mixt::models::llama {

// What the layers need of the model's options.
struct LayerShape {
  std::int64_t hidden_dim, mlp_dim, num_heads, num_kv_heads, head_dim;
  double rms_norm_eps, attention_dropout, init_std;
  bool attention_bias, mlp_bias;
};

// LlamaRMSNorm: x / sqrt(mean(x^2) + eps) in float32, times a weight in x's dtype.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(std::int64_t width, double eps) : eps_(eps) { weight = register_parameter("weight", at::ones({width})); }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = x.to(at::kFloat);
    const at::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
    return weight * (h * at::rsqrt(variance + eps_)).to(x.scalar_type());
  }
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// transformers' _init_weights for nn.Linear: normal(0, initializer_range), zero bias.
inline Linear linear_layer(std::int64_t in, std::int64_t out, bool bias, double std) {
  Linear layer(torch::nn::LinearOptions(in, out).bias(bias));
  at::NoGradGuard no_grad;
  layer->weight.normal_(0.0, std);
  if (bias) layer->bias.zero_();
  return layer;
}

// LlamaAttention: q from num_heads heads, k and v from num_kv_heads (grouped-query
// attention: each k/v head serves num_heads / num_kv_heads query heads), rotary positions
// on q and k, causal scaled dot-product attention at scale head_dim^-0.5.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const LayerShape& s)
      : heads_(s.num_heads),
        kv_heads_(s.num_kv_heads),
        head_dim_(s.head_dim),
        scale_(std::pow(static_cast<double>(s.head_dim), -0.5)),
        dropout_(s.attention_dropout) {
    q_proj =
        register_module("q_proj", linear_layer(s.hidden_dim, s.num_heads * s.head_dim, s.attention_bias, s.init_std));
    k_proj = register_module("k_proj",
                             linear_layer(s.hidden_dim, s.num_kv_heads * s.head_dim, s.attention_bias, s.init_std));
    v_proj = register_module("v_proj",
                             linear_layer(s.hidden_dim, s.num_kv_heads * s.head_dim, s.attention_bias, s.init_std));
    o_proj =
        register_module("o_proj", linear_layer(s.num_heads * s.head_dim, s.hidden_dim, s.attention_bias, s.init_std));
  }
  // x [batch, time, width]; cos and sin [time, head_dim] (or [batch, 1, time, head_dim]).
  // `mask`: undefined for causal attention over the whole row, else bool [batch, 1, time,
  // time], true where a query may see a key (packed rows: causal within each sequence). No
  // size of x becomes a shape, so a traced forward keeps batch and time symbolic.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask = {}) {
    const at::Tensor q = apply_rope(heads(q_proj->forward(x)), cos, sin);
    const at::Tensor k = apply_rope(heads(k_proj->forward(x)), cos, sin);
    const std::optional<at::Tensor> attn_mask = mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
    const at::Tensor y =
        at::scaled_dot_product_attention(q, k, heads(v_proj->forward(x)), attn_mask, is_training() ? dropout_ : 0.0,
                                         /*is_causal=*/!mask.defined(), scale_,
                                         /*enable_gqa=*/kv_heads_ != heads_);
    return o_proj->forward(y.transpose(1, 2).flatten(2));
  }
  // The new positions of x after those whose keys and values (rotated) `k` and `v` hold
  // ([batch, kv_heads, past, head_dim], undefined for none); appends theirs.
  at::Tensor decode(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k, at::Tensor& v) {
    const at::Tensor q = apply_rope(heads(q_proj->forward(x)), cos, sin);
    const at::Tensor new_k = apply_rope(heads(k_proj->forward(x)), cos, sin), new_v = heads(v_proj->forward(x));
    k = k.defined() ? at::cat({k, new_k}, 2) : new_k;
    v = v.defined() ? at::cat({v, new_v}, 2) : new_v;
    const std::int64_t fresh = q.size(2), past = k.size(2) - fresh;
    std::optional<at::Tensor> mask;  // SDPA's is_causal aligns top-left: right only without a past; one new sees all
    if (past > 0 && fresh > 1) mask = at::ones({fresh, past + fresh}, q.options().dtype(at::kBool)).tril(past);
    const at::Tensor y = at::scaled_dot_product_attention(q, k, v, mask, 0.0, /*is_causal=*/past == 0 && fresh > 1,
                                                          scale_, kv_heads_ != heads_);
    return o_proj->forward(y.transpose(1, 2).flatten(2));
  }
  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  // [batch, time, heads x head_dim] -> [batch, heads, time, head_dim]
  at::Tensor heads(const at::Tensor& t) const { return t.unflatten(-1, {-1, head_dim_}).transpose(1, 2); }
  std::int64_t heads_, kv_heads_, head_dim_;
  double scale_, dropout_;
};
TORCH_MODULE(Attention);

// LlamaMLP (SwiGLU): down_proj(silu(gate_proj(x)) * up_proj(x)).
class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const LayerShape& s) {
    gate_proj = register_module("gate_proj", linear_layer(s.hidden_dim, s.mlp_dim, s.mlp_bias, s.init_std));
    up_proj = register_module("up_proj", linear_layer(s.hidden_dim, s.mlp_dim, s.mlp_bias, s.init_std));
    down_proj = register_module("down_proj", linear_layer(s.mlp_dim, s.hidden_dim, s.mlp_bias, s.init_std));
  }
  at::Tensor forward(const at::Tensor& x) {
    return down_proj->forward(at::silu(gate_proj->forward(x)) * up_proj->forward(x));
  }
  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

// LlamaDecoderLayer: pre-norm residual attention, then pre-norm residual MLP.
class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const LayerShape& s) {
    self_attn = register_module("self_attn", Attention(s));
    mlp = register_module("mlp", Mlp(s));
    input_layernorm = register_module("input_layernorm", RmsNorm(s.hidden_dim, s.rms_norm_eps));
    post_attention_layernorm = register_module("post_attention_layernorm", RmsNorm(s.hidden_dim, s.rms_norm_eps));
  }
  at::Tensor forward(const at::Tensor& input, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& mask = {}) {
    const at::Tensor x = input + self_attn->forward(input_layernorm->forward(input), cos, sin, mask);
    return x + mlp->forward(post_attention_layernorm->forward(x));
  }
  at::Tensor decode(const at::Tensor& input, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k,
                    at::Tensor& v) {
    const at::Tensor x = input + self_attn->decode(input_layernorm->forward(input), cos, sin, k, v);
    return x + mlp->forward(post_attention_layernorm->forward(x));
  }
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace mixt::models::llama
