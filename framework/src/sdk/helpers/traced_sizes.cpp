#include "mixt/helpers/traced_sizes.h"

#include <torch/csrc/jit/frontend/tracer.h>

namespace mixt {

at::Tensor upsample_bilinear_like(const at::Tensor& x, const at::Tensor& like, bool align_corners) {
  const std::int64_t height = like.dim() - 2, width = like.dim() - 1;
  if (torch::jit::tracer::isTracing()) {
    // What Python's tracer does for F.interpolate(x, size=like.shape[-2:]): the traced
    // sizes stand in for the numbers in the op's `output_size` argument.
    namespace tracer = torch::jit::tracer;
    tracer::ArgumentStash::stashIntArrayRefElem("output_size", 2, 0, tracer::getSizeOf(like, height));
    tracer::ArgumentStash::stashIntArrayRefElem("output_size", 2, 1, tracer::getSizeOf(like, width));
  }
  return at::upsample_bilinear2d(x, {like.size(height), like.size(width)}, align_corners);
}

}  // namespace mixt
