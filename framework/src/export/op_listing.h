// What `mixt export --list-ops` says: the ATen ops a traced forward records, each with its
// entry of the ONNX op table (export/onnx_op_table.h) or none, before any file is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "export/onnx_op_table.h"
#include "export/traced_model.h"

namespace mixt {

struct TracedOp {
  std::string aten;                              // "aten::linear"
  std::int64_t uses = 0;                         // nodes of the graph that record it
  std::string first_module;                      // the routed submodule of its first use; "" outside
  std::string onnx;                              // what its translation writes; "" when nothing translates it
  std::string source;                            // "built in", or the plugin that registered its translation
};

// The ops of the traced graph (aten::, and custom ops of plugins) in the order of their first
// use. prim:: nodes (constants, attribute reads, lists) are bookkeeping, not ops, and are
// left out.
std::vector<TracedOp> traced_ops(const TracedModel& traced);

// The listing as a Markdown table, then a line saying whether the whole graph translates at
// `opset` (an entry may still refuse one use of its op: the refusal is quoted).
std::string describe_traced_ops(const TracedModel& traced, std::int64_t opset);

}  // namespace mixt
