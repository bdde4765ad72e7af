// Rotary position embedding (Su et al. 2021) as transformers' Llama computes it
// (modeling_llama.py LlamaRotaryEmbedding, apply_rotary_pos_emb; modeling_rope_utils.py for
// Llama 3.1's frequency scaling): the same float32 arithmetic, so the same bits.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>

namespace mixt::models::llama {

struct RopeOptions {
  double theta = 10000.0;        // rope_theta: the base of the wavelengths
  std::string type = "default";  // "default", or "llama3": Llama 3.1's scaled low frequencies
  // rope_type llama3's parameters (transformers' names without "rope_").
  double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  std::int64_t original_context = 8192;  // original_max_position_embeddings
};

// The inverse frequencies, float32 [head_dim / 2].
at::Tensor inverse_frequencies(std::int64_t head_dim, const RopeOptions& options);

// cos and sin [positions, head_dim] of int64 `positions` [positions], in `dtype`.
std::pair<at::Tensor, at::Tensor> rope_tables(const at::Tensor& positions, const at::Tensor& inverse_frequencies,
                                              at::ScalarType dtype);

// x [batch, heads, time, head_dim] rotated: x cos + rotate_half(x) sin.
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace mixt::models::llama
