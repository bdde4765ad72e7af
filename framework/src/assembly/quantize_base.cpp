#include "assembly/quantize_base.h"

#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <optional>
#include <stdexcept>

#include "mixt/helpers/linear.h"
#include "mixt/helpers/nf4.h"
#include "mixt/linear_head.h"

namespace mixt {

namespace {
const Optional<std::string> kQuantizeBase{
    "quantize_base",
    "hold the frozen base's linear layers (all but the output head) in this format, dequantised in the forward: "
    "nf4 is QLoRA's 4-bit NormalFloat in blocks of 64 with double-quantised scales (torchao's to_nf4); read by mixt",
    one_of({"nf4"})};

// Nf4Weight::bytes() of a weight of `numel` values of `dtype` (blocks 64, groups 256).
std::int64_t nf4_bytes(std::int64_t numel, at::ScalarType dtype) {
  const std::int64_t blocks = numel / 64, groups = (blocks + 255) / 256;
  return numel / 2 + blocks + (groups + 1 + 16) * static_cast<std::int64_t>(c10::elementSize(dtype));
}

std::string size_text(std::int64_t bytes) {
  char text[32];
  const auto b = static_cast<double>(bytes);
  if (b >= 1e9) {
    std::snprintf(text, sizeof text, "%.1f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.1f kB", b / 1e3);
  }
  return text;
}
}  // namespace

const OptionDoc& adapter_quantize_base_doc() {
  static const OptionDoc doc = kQuantizeBase.doc();
  return doc;
}

std::int64_t quantize_base(const Config& section, torch::nn::Module& model) {
  const std::optional<std::string> format = kQuantizeBase.read(section);
  if (!format) return 0;
  std::string head;
  if (const auto* with_head = dynamic_cast<const LinearHead*>(&model)) head = with_head->head().name;
  std::int64_t quantized = 0;
  for (const LinearLayer& layer : linear_layers(model)) {
    // mixt::Linear layers, whose weight is their own parameter; not the output head (the
    // fused loss reads its weight directly, and a tied head's is the embedding's).
    if (!layer.map.empty() || layer.name == head || !dynamic_cast<torch::nn::LinearImpl*>(layer.owner)) continue;
    try {
      quantize_linear_nf4(layer);
    } catch (const std::invalid_argument& e) {
      section.fail("quantize_base", "'" + layer.name + "' cannot be held in NF4: " + e.what(),
                   "a model whose linear layers have a multiple of 64 weights");
    }
    ++quantized;
  }
  if (quantized == 0) section.fail("quantize_base", "the model has no linear layer to quantise besides its head");
  return quantized;
}

std::string quantized_base_note(torch::nn::Module& model) {
  std::int64_t layers = 0, float_bytes = 0, held = 0;
  std::string dtype;
  for (const LinearLayer& layer : linear_layers(model)) {
    if (!held_in_nf4(layer.weight)) continue;
    ++layers;
    float_bytes += layer.weight.numel() * static_cast<std::int64_t>(layer.weight.element_size());
    held += nf4_bytes(layer.weight.numel(), layer.weight.scalar_type());
    const at::ScalarType type = layer.weight.scalar_type();
    dtype = type == at::kFloat ? "float32" : type == at::kBFloat16 ? "bfloat16" : c10::toString(type);
  }
  if (layers == 0) return "";
  return "the base's " + std::to_string(layers) + " linear layers in NF4: " + size_text(float_bytes) + " of " + dtype +
         " weights held in " + size_text(held);
}

}  // namespace mixt
