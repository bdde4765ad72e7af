// `mixt evaluate RECIPE|RUN|CHECKPOINT`: scores trained weights on a data section of the
// recipe, with the trainer's own evaluation (train/evaluator.h, the Evaluator the trainer uses).
#pragma once

#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

struct EvaluateOptions {
  std::string target;                  // a recipe file, a run directory, its checkpoints/, or a checkpoint
  std::vector<std::string> overrides;  // key=value, as for `mixt run`
  std::string split = "val";           // the data.* section scored
  std::string precision;               // a policy name instead of the recipe's; empty: the recipe's
  bool ema = false;                    // the ema callback's average instead of the model's weights
  bool best = false;                   // the run's best checkpoint instead of its newest
  bool per_class = false;
  std::string confusion_csv;  // files to write; empty: none
  std::string confusion_png;
  bool json = false;  // the report as JSON on stdout
};

int evaluate(const EvaluateOptions& options);
void add_evaluate_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
