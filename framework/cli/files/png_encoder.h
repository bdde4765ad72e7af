// PNG encoding without an image library (the mixt program loads none: cli/drawing_module.h):
// 8-bit palette or RGB images, deflated by zlib, which libmixt links already.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace mixt::cli {

// `pixels` uint8 [H, W] with `palette` (RGB triples, at most 256: a palette PNG, what VOC's
// masks are), or uint8 [H, W, 3] with an empty palette (an RGB PNG). The file's bytes.
std::vector<std::uint8_t> encode_png(const at::Tensor& pixels, const std::vector<std::uint8_t>& palette);

}  // namespace mixt::cli
