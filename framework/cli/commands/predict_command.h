// `mixt predict RECIPE|RUN|CHECKPOINT`: a trained model in eval mode on images (--image:
// decoded by the recipe's dataset, through its evaluation transforms; the top-k classes by
// name) or on a tensor (--input/--output: safetensors in, safetensors out).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

struct PredictOptions {
  std::string target;                  // a recipe, a run directory, its checkpoints/ or a checkpoint
  std::vector<std::string> overrides;  // key=value, as for `mixt run`
  bool ema = false;                    // the ema callback's average (from a checkpoint)
  bool best = false;                   // the run's best checkpoint instead of its newest
  // Image mode.
  std::vector<std::string> images;  // files and folders (walked, sorted, the dataset's extensions)
  std::string transforms;           // YAML (a preset name or a list) instead of data.val's transforms
  std::int64_t top_k = 5;           // capped at the class count
  std::int64_t batch = 32;          // images per forward pass
  bool json = false;                // the predictions as JSON on stdout
  std::string csv;                  // a file to write the predictions to, a row per image and rank
  std::string draw_dir;             // where a task that draws its predictions writes them ("": here)
  bool image_options_given = false;  // an option above, after --image's, given on the command line
  // Tensor mode.
  std::string input;   // safetensors file with the input batch
  std::string output;  // safetensors file to write the outputs to
};

int predict(const PredictOptions& options);
void add_predict_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
