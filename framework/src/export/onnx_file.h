// An ONNX graph (export/onnx_translation.h) as an ONNX file's bytes, serialized by
// libtorch_cpu's own ONNX writer (torch::jit::export_onnx: mixt links no protobuf of its
// own), checked by the ONNX checker libtorch_cpu carries, with mixt's metadata.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "export/onnx_translation.h"

namespace mixt {

// The dimensions of the input and of the output that stay symbolic in the file, by index:
// the batch (0) always; the task's open axes (mixt/task.h), e.g. a token model's 1, "time".
struct SymbolicDims {
  std::map<std::int64_t, std::string> input{{0, "batch"}};
  std::map<std::int64_t, std::string> output{{0, "batch"}};
};

// The model file: opset `opset`, input "input" and output "output" with `symbolic`
// dimensions, initializers under the parameter names, producer "mixt", `metadata` as the
// model's metadata_props.
std::string onnx_file_bytes(const OnnxGraph& graph, std::int64_t opset,
                            const std::map<std::string, std::string>& metadata, const SymbolicDims& symbolic = {});

}  // namespace mixt
