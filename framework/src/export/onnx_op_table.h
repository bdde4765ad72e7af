// The ATen -> ONNX op table of `mixt export --format onnx`: one entry per ATen op the
// tracer records, each turning one traced node into onnx:: nodes at the requested opset
// (17 to 21). An op missing here is refused by name (export/onnx_translation.h); every
// entry has a test of its own (tests/export/onnx_op_table_test.cpp), run in ONNX Runtime.
#pragma once

#include <string_view>
#include <vector>

#include "export/onnx_builder.h"

namespace mixt {

struct OnnxTranslation {
  const char* aten;  // the traced op, e.g. "aten::relu_"
  const char* onnx;  // what it becomes, for docs/deploy.md's table
  void (*translate)(AtenNode& node, OnnxBuilder& builder);
};

// Sorted by ATen name.
const std::vector<OnnxTranslation>& onnx_op_table();
// The entry for `aten`, or null.
const OnnxTranslation* find_onnx_translation(std::string_view aten);

}  // namespace mixt
