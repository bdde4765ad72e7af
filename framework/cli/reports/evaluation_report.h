// What `mixt evaluate` prints and writes: the figures as text or JSON, the task's per-class
// figures (classification: accuracy) with the class names, and the confusion matrix as CSV.
#pragma once

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixt/callback.h"

namespace mixt::cli {

struct EvaluationReport {
  std::string source;     // what was evaluated: a checkpoint, or the recipe (with its model.weights)
  std::string weights;    // "model", or "ema" for the ema callback's average
  std::string split;      // the data section scored, e.g. "val"
  std::string precision;  // the policy it ran under
  Evaluation evaluation;
  at::Tensor confusion;                  // [classes, classes] int64 on the CPU; undefined when not asked for
  std::vector<std::string> class_names;  // one per model output
  std::string per_class_title;           // the task's: "per-class top-1 accuracy"
  std::vector<ClassFigure> per_class;    // the task's columns from `confusion`; empty: none
};

// A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_field(const std::string& text);

// The figures, and with `per_class` a table of each class's samples, correct predictions
// (the confusion matrix's row sum and diagonal) and the task's per-class figures.
std::string report_text(const EvaluationReport& report, bool per_class);
// Every figure, the per-class figures and the matrix (rows: labels) when it was computed.
nlohmann::json report_json(const EvaluationReport& report);
// A header row of predicted class names, then one row per label: its name and its counts.
std::string confusion_csv(const at::Tensor& confusion, const std::vector<std::string>& names);

}  // namespace mixt::cli
