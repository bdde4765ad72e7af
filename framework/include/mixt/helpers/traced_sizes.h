// Sizes a forward reads from one tensor to shape another, kept as reads when `mixt export`
// traces it. A plain `x.size(2)` is a number to the tracer: the exported model would take
// only the traced image size. A segmentation model upsamples its logits back to the
// image's size with this, and its ONNX and TorchScript files take any image size.
#pragma once

#include <ATen/ATen.h>

namespace mixt {

// at::upsample_bilinear2d(x, {like.size(-2), like.size(-1)}, align_corners); traced, the
// output size is read from `like` (ONNX: Shape, Gather, Resize).
at::Tensor upsample_bilinear_like(const at::Tensor& x, const at::Tensor& like, bool align_corners = false);

}  // namespace mixt
