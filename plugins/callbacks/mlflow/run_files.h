// What a run directory holds for MLflow: metrics.jsonl's figures as metric points, the
// resolved recipe.yaml flattened into parameters, and the MLflow run's id and final status
// kept beside them (mlflow_run_id, mlflow_status) so a resume or `mixt mlflow-sync` continues
// the same MLflow run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace mixt::mlflow {

struct MetricPoint {
  std::string key;  // "train/loss", "val/top1": TensorBoard's tags for the same figures
  double value = 0;
  std::int64_t step = 0;
};

using Pairs = std::vector<std::pair<std::string, std::string>>;

// The figures of one metrics.jsonl line: a step event's under train/, an epoch's val_* under
// val/ and the rest under data/, each at the event's global step; counters and clock times
// (epoch, epoch_step, *elapsed_s) and other events (warnings, stops) give none.
std::vector<MetricPoint> metric_points(const std::string& line);

// Whole lines of metrics.jsonl from byte `offset` on, as points, stopping after the line that
// brings them to `max_points` or more; `offset` moves past the lines read. A line still being
// written (no newline yet) waits for the next read.
std::vector<MetricPoint> read_metrics(const std::filesystem::path& file, std::uintmax_t& offset,
                                      std::size_t max_points);

// recipe.yaml's leaves as "a.b.c" = value: scalars as written, lists in YAML flow style.
Pairs recipe_params(const std::filesystem::path& recipe_yaml);

// The recipe's mlflow callback entry's scalars and lists ({} when it has none), for mlflow-sync.
struct RecipeTracking {
  std::string tracking_uri, experiment, run_name;
  std::vector<std::string> artifacts, tags;
  bool found = false;
};
RecipeTracking recipe_tracking(const std::filesystem::path& recipe_yaml);

inline constexpr const char* kRunIdFile = "mlflow_run_id";
inline constexpr const char* kStatusFile = "mlflow_status";

// A one-line file's text ("" when absent), and its atomic replacement.
std::string read_line(const std::filesystem::path& file);
void write_line(const std::filesystem::path& file, const std::string& text);

// "key=value" (the recipe's tags option) as a pair; key "" when there is no '='.
std::pair<std::string, std::string> split_tag(const std::string& tag);

}  // namespace mixt::mlflow
