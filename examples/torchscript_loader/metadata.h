// What `mixt export` writes into a TorchScript file besides the model: the extra file
// "mixt.json" (docs/deploy.md, "The metadata"), read back into what a program needs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

struct ModelMetadata {
  std::vector<std::string> classes;        // output i is classes[i]; empty when the file names none
  std::vector<std::int64_t> sample_shape;  // one sample, without the batch: {3, 224, 224}
  nlohmann::json transforms;               // data.<split>.transforms as the recipe states them
  std::string data_section;                // "data.val", where the transforms come from
  std::string recipe, source, version;
};

// Parses the contents of "mixt.json"; throws std::runtime_error naming what is missing.
ModelMetadata parse_metadata(const std::string& text);
