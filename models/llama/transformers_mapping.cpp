#include "transformers_mapping.h"

#include <string>

namespace mixt::models::llama {

// transformers' LlamaConfig. rope parameters sit at the top level and under rope_scaling in
// files written before transformers 5, under rope_parameters since: both are read.
mixt::TransformersConfig transformers_config() {
  mixt::TransformersConfig config;
  config.model_types = {"llama"};
  config.options = {{"vocab_size", "vocab_size"},
                    {"max_position_embeddings", "context_length"},
                    {"num_hidden_layers", "num_layers"},
                    {"num_attention_heads", "num_heads"},
                    {"num_key_value_heads", "num_kv_heads"},
                    {"hidden_size", "hidden_dim"},
                    {"intermediate_size", "mlp_dim"},
                    {"head_dim", "head_dim"},
                    {"rms_norm_eps", "rms_norm_eps"},
                    {"attention_dropout", "attention_dropout"},
                    {"initializer_range", "init_std"},
                    {"tie_word_embeddings", "tie_embeddings"},
                    {"attention_bias", "attention_bias"},
                    {"mlp_bias", "mlp_bias"},
                    {"rope_theta", "rope_theta"},
                    {"rope_parameters.rope_theta", "rope_theta"},
                    {"rope_scaling.rope_type", "rope_type"},
                    {"rope_scaling.type", "rope_type"},
                    {"rope_parameters.rope_type", "rope_type"}};
  for (const char* prefix : {"rope_scaling.", "rope_parameters."}) {
    const std::string p = prefix;
    config.options.push_back({p + "factor", "rope_factor"});
    config.options.push_back({p + "low_freq_factor", "rope_low_freq_factor"});
    config.options.push_back({p + "high_freq_factor", "rope_high_freq_factor"});
    config.options.push_back({p + "original_max_position_embeddings", "rope_original_context"});
  }
  config.implements = {{"hidden_act", "\"silu\""}, {"pretraining_tp", "1"}};
  return config;
}

// LlamaConfig's defaults for the keys a published config.json may omit: Llama-2's files have
// no rope_theta, llama-7b's no num_key_value_heads, and a preset's values would stand in.
// head_dim has none here: the option's own default is LlamaConfig's (hidden / heads).
mixt::TransformersDefaults transformers_defaults() {
  mixt::TransformersDefaults defaults;
  defaults.config_class = "LlamaConfig";
  defaults.values = {{"vocab_size", "32000"},       {"max_position_embeddings", "2048"},
                     {"num_hidden_layers", "32"},   {"num_attention_heads", "32"},
                     {"hidden_size", "4096"},       {"intermediate_size", "11008"},
                     {"rms_norm_eps", "1e-06"},     {"attention_dropout", "0.0"},
                     {"initializer_range", "0.02"}, {"tie_word_embeddings", "false"},
                     {"attention_bias", "false"},   {"mlp_bias", "false"},
                     {"rope_theta", "10000.0"},     {"rope_scaling.rope_type", "\"default\""}};
  defaults.copies = {{"num_key_value_heads", "num_attention_heads"}};
  return defaults;
}

}  // namespace mixt::models::llama
