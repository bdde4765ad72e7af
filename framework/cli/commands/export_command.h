// `mixt export SOURCE -o FILE [--format onnx|torchscript|safetensors]`: a model out of mixt.
// SOURCE is a checkpoint, a run directory (--best, --ema) or a recipe (its model as built,
// with model.weights if set). safetensors: the weights with torchvision's names
// (files/weights_export.h); with --merge-adapter, a run's adapter merged into them
// (mixt::MergesIntoBase). transformers: a folder as save_pretrained writes it, model.safetensors
// and model.from's config.json, an adapter merged (files/transformers_export.h). torchscript and onnx: the model traced
// once on the CPU in float32 (export/traced_model.h); TorchScript saves the traced module, ONNX translates its graph
// through mixt's op table (export/onnx_op_table.h). Both carry the deployment metadata
// (files/export_metadata.h) and keep the batch dimension symbolic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

struct ExportOptions {
  std::string source;
  std::string output;
  std::string format;                     // empty: from the output's extension
  std::int64_t opset = 17;                // ONNX, 17 to 21
  std::string dtype = "float32";          // ONNX: float32 or float16 (initializers, constants, input, output)
  bool ema = false;                       // the ema callback's average (from a checkpoint)
  bool best = false;                      // the run's best checkpoint instead of its newest
  std::vector<std::int64_t> input_shape;  // one sample, when the recipe's data cannot say
  std::vector<std::string> overrides;     // key=value, as for `mixt run`
  bool list_ops = false;                  // list the trace's ops and their ONNX translations; write nothing
  bool merge_adapter = false;             // the run's adapter merged into the base weights (safetensors)
};

// The format `output` names: .onnx, .pt/.ts/.torchscript (TorchScript), else safetensors.
std::string export_format_of(const std::string& output);

int export_model(const ExportOptions& options);
void add_export_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
