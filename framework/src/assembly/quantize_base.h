// The adapter section's `quantize_base: nf4` (QLoRA): the frozen model's linear layers held
// in NF4 (mixt/helpers/nf4.h) before the adapter wraps them, whatever the adapter.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>

#include "mixt/config.h"
#include "mixt/options.h"

namespace mixt {

// Quantises every mixt::Linear layer of the frozen `model` except its output head (the
// layer LinearHead::head() names: lm_head) when the section has `quantize_base: nf4`; does
// nothing without it. Recipe errors at quantize_base: a layer whose weight is not a whole
// number of blocks of 64. Returns the number of layers quantised.
std::int64_t quantize_base(const Config& section, torch::nn::Module& model);

// "the base's 14 linear layers in NF4: 4.5 MB of float32 weights held in 0.6 MB", or ""
// when no layer of `model` is held in NF4.
std::string quantized_base_note(torch::nn::Module& model);

// The `quantize_base` option of an adapter section (read by mixt), for `mixt describe`.
const OptionDoc& adapter_quantize_base_doc();

}  // namespace mixt
