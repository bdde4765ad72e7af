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

// The model file: opset `opset`, input "input" and output "output" whose leading dimensions
// are symbolic under `symbolic_dims` ("batch"; "batch", "time" for a token model),
// initializers under the parameter names, producer "mixt", `metadata` as the model's
// metadata_props.
std::string onnx_file_bytes(const OnnxGraph& graph, std::int64_t opset,
                            const std::map<std::string, std::string>& metadata,
                            const std::vector<std::string>& symbolic_dims = {"batch"});

}  // namespace mixt
