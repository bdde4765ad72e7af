// `mixt export --dtype float16`: an ONNX graph (export/onnx_translation.h) whose float32
// tensors — initializers, constants, the input and the output — become float16, for GPU
// runtimes. The ops are the same; each computes in float16 where the runtime has such a
// kernel (ONNX Runtime's CPU provider converts where it lacks one).
#pragma once

#include "export/onnx_translation.h"

namespace mixt {

void convert_to_float16(OnnxGraph& graph);

}  // namespace mixt
