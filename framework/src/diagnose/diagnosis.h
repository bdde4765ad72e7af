// `mixt diagnose RECIPE`: run a few steps of the recipe under its precision policy, record
// where values leave float16's range (observations.h), and when the run goes non-finite or
// skips most of its steps, search the modules the model routes for the smallest
// precision.fp32_modules that makes the same steps healthy. Under a float8 policy it also
// counts what each float8 layer's casts lose and names the layers to keep in bfloat16.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "experiment/session.h"
#include "diagnose/observations.h"

namespace mixt::diagnose {

struct DiagnoseOptions {
  std::int64_t steps = 20;            // optimizer steps per run (the observed one and each trial)
  std::int64_t max_trials = 8;        // runs the search may make beyond the observed one
  double max_skipped_fraction = 0.5;  // more skipped steps than this makes a run unhealthy
};

// One run of the search: the recipe with `fp32_modules` (the recipe's own and the tried ones).
struct Trial {
  std::vector<std::string> fp32_modules;
  std::int64_t steps = 0;
  std::int64_t skipped = 0;
  bool losses_finite = true;
  bool healthy = false;
};

// A float8 layer is kept in bfloat16 when, in any of its operands (input, weight, output
// gradient), more than 1% of the non-zero values underflow to zero or more than 0.01%
// saturate (the clamp cuts the largest values, the ones that matter most), counted over
// the steps after the first (a delayed-scaling recipe's first casts use its initial scales).
inline constexpr double kFloat8UnderflowLimit = 0.01;
inline constexpr double kFloat8SaturationLimit = 0.0001;
bool keep_in_bfloat16(const Float8Layer& layer);

struct Diagnosis {
  std::string recipe;
  std::string policy;
  std::string device;
  std::vector<std::string> recipe_fp32_modules;  // what the recipe already keeps in float32
  std::vector<std::string> recipe_fp8_exclude;   // what the recipe already keeps out of float8
  Observations observed;                         // the recipe as written
  std::optional<std::string> stopped;            // why the observed run ended early, if it did
  bool healthy = false;
  std::vector<Trial> trials;
  // The smallest fp32_modules found that makes the run healthy (the recipe's included),
  // and whether the search proved it minimal before running out of trials.
  std::optional<std::vector<std::string>> fix;
  bool fix_minimal = false;
  // The float8 layers keep_in_bfloat16() names; the recipe's fp8_exclude with them.
  std::vector<std::string> float8_keep;
  std::optional<std::vector<std::string>> fp8_exclude;
};

// Says what each trial is about to try and how it went (mixt diagnose's progress lines).
using TrialProgress = std::function<void(const std::string& line)>;

// Throws mixt::Error for a bad recipe (exit 2), as `mixt check` does.
Diagnosis diagnose(Session& session, const std::filesystem::path& recipe, const std::vector<std::string>& overrides,
                   const DiagnoseOptions& options, const TrialProgress& progress);

// "[layer4, fc]": a YAML flow list of names.
std::string flow_list(const std::vector<std::string>& names);
// "precision.fp32_modules: [layer4, fc]"
std::string fp32_modules_line(const std::vector<std::string>& modules);
// "precision.fp8_exclude: [encoder.layers.encoder_layer_3.mlp.0]"
std::string fp8_exclude_line(const std::vector<std::string>& modules);

}  // namespace mixt::diagnose
