// What a deployer needs besides the graph, written into every exported model file: ONNX
// metadata_props (one key each) and the TorchScript file's extra file "mixt.json" (the same
// keys in one JSON object).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mixt/task.h"
#include "recipe/recipe_loader.h"

namespace mixt::cli {

struct ExportFacts {
  std::string source;                      // the checkpoint, weights file or recipe exported
  std::vector<std::string> class_names;    // output i's name; empty when unknown
  std::vector<std::int64_t> sample_shape;  // one input, e.g. {3, 224, 224}
  std::vector<std::int64_t> output_shape;  // as traced, batch first: {2, 10}; {2, 64, vocab}
  std::string data_split;                  // the data section whose transforms feed the model ("val")
  bool channels_last = false;              // trainer.channels_last
  std::string format;                      // "onnx", "torchscript"
  std::int64_t opset = 0;                  // ONNX only
  std::string dtype = "float32";           // of the input and the output
  std::string dataset_preprocessing;       // data_split's dataset's own description, or ""
  // The task's open axes and meanings: a language model's input is int64 token ids
  // [batch, time], time up to sample_shape[0], its output next-token logits [batch, time, vocab].
  ExportedInterface exported{};
  bool integer_input = false;  // token ids, not floats
  // The longest sequence the model takes (mixt::CachedDecoding), 0 when it does not say: then
  // an open axis's max_<name> is the traced size, else this.
  std::int64_t model_context = 0;
};

// Keys: mixt.version, mixt.recipe (its name:), mixt.source, mixt.format, mixt.classes (a JSON
// array), mixt.input (JSON: name, dtype, shape with "batch" first, each open axis by name with
// its max_<name>: "time" and max_time for a token model), mixt.output (JSON),
// mixt.preprocessing (JSON: the eval transforms as the recipe states them, the dataset's own
// description of what an input goes through, channel order, channels_last); values are strings.
std::map<std::string, std::string> export_metadata(const Recipe& recipe, const ExportFacts& facts);

// The same, as one JSON object (the TorchScript extra file).
std::string export_metadata_json(const std::map<std::string, std::string>& metadata);

}  // namespace mixt::cli
