#include "export/onnx_file.h"

// torch's header names the ONNX protobuf namespace through ONNX_NAMESPACE and leaves it to the
// includer; the wheel's libtorch_cpu was built with onnx_torch (its exported symbols say so).
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx_torch
#endif
#include <torch/csrc/jit/serialization/export.h>

#include "mixt/error.h"
#include "mixt/version.h"

namespace mixt {

namespace {

// Protocol buffers' wire format, for the few ModelProto fields export_onnx does not take.
// A message may be extended by appending fields: a repeated field gains an element, and a
// singular field appended again replaces the earlier value (the encoding's own rule).
void varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void length_delimited(std::string& out, std::uint32_t field, const std::string& bytes) {
  varint(out, (static_cast<std::uint64_t>(field) << 3) | 2);
  varint(out, bytes.size());
  out += bytes;
}

// ModelProto fields (onnx/onnx.proto3): producer_name = 2, producer_version = 3,
// metadata_props = 14 (StringStringEntryProto: key = 1, value = 2).
constexpr std::uint32_t kProducerName = 2, kProducerVersion = 3, kMetadataProps = 14;

}  // namespace

std::string onnx_file_bytes(const OnnxGraph& graph, std::int64_t opset,
                            const std::map<std::string, std::string>& metadata, const SymbolicDims& symbolic) {
  const std::unordered_map<std::string, std::unordered_map<std::int64_t, std::string>> dynamic_axes{
      {"input", {symbolic.input.begin(), symbolic.input.end()}},
      {"output", {symbolic.output.begin(), symbolic.output.end()}}};
  auto exported = torch::jit::export_onnx(graph.graph, graph.initializers, opset, dynamic_axes,
                                          /*defer_weight_export=*/false, torch::onnx::OperatorExportTypes::ONNX,
                                          /*strip_doc_string=*/true, /*keep_initializers_as_inputs=*/false);
  std::string bytes = torch::jit::serialize_model_proto_to_string(std::get<0>(exported));
  length_delimited(bytes, kProducerName, "mixt");
  length_delimited(bytes, kProducerVersion, version());
  for (const auto& [key, value] : metadata) {
    std::string entry;
    length_delimited(entry, 1, key);
    length_delimited(entry, 2, value);
    length_delimited(bytes, kMetadataProps, entry);
  }
  try {
    torch::jit::check_onnx_proto(bytes);
  } catch (const std::exception& e) {
    throw runtime_error(std::string("the ONNX checker refused the graph mixt made: ") + e.what(),
                        "this is a bug in mixt's op table: please report it with the recipe");
  }
  return bytes;
}

}  // namespace mixt
