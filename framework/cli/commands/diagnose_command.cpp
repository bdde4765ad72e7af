#include "commands/diagnose_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "experiment/session.h"

namespace mixt::cli {

namespace {

using diagnose::Diagnosis;

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), pattern, value);
  return text;
}

// "<0.01%" rather than "0.00%" for a few values in millions: they are there.
std::string percent(std::int64_t part, std::int64_t whole) {
  if (whole == 0) return "-";
  const double share = 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  return part > 0 && share < 0.005 ? "<0.01%" : format("%.2f%%", share);
}

std::string number(double value) {
  return std::isfinite(value) ? format("%.6g", value) : (std::isnan(value) ? "NaN" : "inf");
}

// The loss scale's path: its first and last value and its smallest, with the steps at which it changed.
std::string scale_path(const diagnose::Observations& o) {
  if (o.steps.empty()) return "-";
  double lowest = o.steps.front().loss_scale;
  std::int64_t changes = 0;
  for (std::size_t i = 1; i < o.steps.size(); ++i) {
    lowest = std::min(lowest, o.steps[i].loss_scale);
    changes += o.steps[i].loss_scale != o.steps[i - 1].loss_scale;
  }
  if (changes == 0) return number(o.steps.front().loss_scale) + " throughout";
  return number(o.steps.front().loss_scale) + " -> " + number(o.steps.back().loss_scale) + " (lowest " +
         number(lowest) + ", " + std::to_string(changes) + " changes)";
}

// Per float8 layer, each operand's underflow and saturation, and the layers to keep in bfloat16.
void print_float8(const Diagnosis& d) {
  const auto& layers = d.observed.float8_layers;
  if (layers.empty()) return;
  const bool later = layers.front().later[0].values > 0;
  std::printf(
      "\nfloat8 layers: values their casts lose, of the non-zero ones (%s; e4m3: max 448, smallest "
      "subnormal 2^-9; e5m2: max 57344, 2^-16)\n",
      later ? "steps after the first" : "the first step");
  std::printf("  %-28s %21s %21s %21s\n", "", "input (e4m3)", "weight (e4m3)", "output grad (e5m2)");
  std::printf("  %-28s %10s %10s %10s %10s %10s %10s\n", "layer", "underflow", "saturated", "underflow", "saturated",
              "underflow", "saturated");
  for (const diagnose::Float8Layer& layer : layers) {
    std::printf("  %-28s", layer.name.c_str());
    for (const diagnose::Float8CastCounts& c : layer.judged()) {
      std::printf(" %10s %10s", percent(c.underflow, c.nonzero).c_str(), percent(c.saturated, c.nonzero).c_str());
    }
    std::printf("%s\n", diagnose::keep_in_bfloat16(layer) ? "  keep in bfloat16" : "");
  }
  const std::string limits = "underflow above " + format("%g%%", 100 * diagnose::kFloat8UnderflowLimit) +
                             " or saturation above " + format("%g%%", 100 * diagnose::kFloat8SaturationLimit);
  if (d.fp8_exclude) {
    std::printf("float8: %zu of %zu layers lose too much (%s): to keep them in bfloat16, add to the recipe\n  %s\n",
                d.float8_keep.size(), layers.size(), limits.c_str(),
                diagnose::fp8_exclude_line(*d.fp8_exclude).c_str());
  } else {
    std::printf("float8: no layer loses too much (%s)\n", limits.c_str());
  }
}

// The run as written: its steps, skips, losses and loss scale, and where inf/NaN came first.
void print_summary(const Diagnosis& d) {
  const diagnose::Observations& o = d.observed;
  std::int64_t nonfinite_losses = 0;
  for (const auto& s : o.steps) nonfinite_losses += !std::isfinite(s.loss);
  std::printf("mixt diagnose: %s, precision %s on %s, %zu steps\n", d.recipe.c_str(), d.policy.c_str(),
              d.device.c_str(), o.steps.size());
  if (!d.recipe_fp32_modules.empty()) std::printf("  the recipe keeps %s in float32\n", diagnose::flow_list(d.recipe_fp32_modules).c_str());
  std::printf("  skipped steps  %lld of %zu\n", static_cast<long long>(o.skipped()), o.steps.size());
  std::printf("  inf/NaN loss   %lld of %zu steps\n", static_cast<long long>(nonfinite_losses), o.steps.size());
  std::printf("  loss scale     %s\n", scale_path(o).c_str());
  if (!o.steps.empty()) std::printf("  last loss      %s\n", number(o.steps.back().loss).c_str());
  if (o.first_nonfinite) {
    std::printf("  first inf/NaN  output of %s at step %lld\n", o.first_nonfinite->module.c_str(),
                static_cast<long long>(o.first_nonfinite->step));
  }
  if (d.stopped) std::printf("  stopped early  %s\n", d.stopped->c_str());
}

// Per routed module, how much of its forward output float16 cannot hold.
void print_modules(const diagnose::Observations& o) {
  std::printf("\nforward outputs of the routed modules (over all steps; float16: max 65504, smallest normal 6.1e-05)\n");
  if (o.modules.empty()) {
    std::printf("  none: the model routes no submodule through mixt::call_submodule, so none can be kept in float32\n");
  } else {
    std::printf("  %-24s %12s %14s %16s %10s\n", "module", "abs max", "> float16 max", "< float16 normal", "inf/NaN");
    for (const auto& [name, c] : o.modules) {
      // Every value inf/NaN: there is no finite largest one to show.
      const std::string abs_max = c.nonfinite == c.values ? "-" : number(c.abs_max);
      std::printf("  %-24s %12s %14s %16s %10s\n", name.c_str(), abs_max.c_str(),
                  percent(c.beyond_float16, c.values).c_str(), percent(c.below_float16_normal, c.values).c_str(),
                  percent(c.nonfinite, c.values).c_str());
    }
  }
}

// The share of gradient values float16 would flush to zero, and the ten parameters with most.
void print_gradients(const diagnose::Observations& o) {
  std::int64_t nonzero = 0, flushed = 0;
  std::vector<std::pair<std::string, diagnose::UnderflowCounts>> worst;
  for (const auto& [name, counts] : o.parameters) {
    nonzero += counts.nonzero;
    flushed += counts.flushed;
    if (counts.flushed > 0) worst.emplace_back(name, counts);
  }
  std::sort(worst.begin(), worst.end(), [](const auto& a, const auto& b) { return a.second.fraction() > b.second.fraction(); });
  if (nonzero == 0) {
    std::printf("\ngradients: none finite and non-zero (each step's held inf/NaN)\n");
  } else {
    std::printf("\ngradients that float16 would flush to zero at each step's loss scale: %s of %lld non-zero values\n",
                percent(flushed, nonzero).c_str(), static_cast<long long>(nonzero));
  }
  for (std::size_t i = 0; i < worst.size() && i < 10; ++i) {
    std::printf("  %-40s %10s of %lld\n", worst[i].first.c_str(),
                percent(worst[i].second.flushed, worst[i].second.nonzero).c_str(),
                static_cast<long long>(worst[i].second.nonzero));
  }
}

// Healthy, or the trials and the fix they found (or why there is none).
void print_verdict(const Diagnosis& d, const diagnose::DiagnoseOptions& options) {
  const diagnose::Observations& o = d.observed;
  if (d.healthy) {
    std::printf("healthy: every loss finite, %lld of %zu steps skipped: nothing to fix\n",
                static_cast<long long>(o.skipped()), o.steps.size());
    return;
  }
  for (std::size_t i = 0; i < d.trials.size(); ++i) {
    const auto& t = d.trials[i];
    std::printf("  trial %zu  %-40s %lld steps, %lld skipped, loss %s: %s\n", i + 1, diagnose::flow_list(t.fp32_modules).c_str(),
                static_cast<long long>(t.steps), static_cast<long long>(t.skipped),
                t.losses_finite ? "finite" : "inf/NaN", t.healthy ? "healthy" : "not healthy");
  }
  if (d.fix) {
    std::printf("fix: add to the recipe\n  %s\n", diagnose::fp32_modules_line(*d.fix).c_str());
    if (!d.fix_minimal) {
      std::printf("  (maybe not the smallest: --max-trials %lld ran out; raise it to search further)\n",
                  static_cast<long long>(options.max_trials));
    }
  } else if (o.modules.empty()) {
    std::printf("no fix to search for: the model routes no submodule through mixt::call_submodule, so "
                "precision.fp32_modules cannot keep any in float32 (docs/precision.md, Full-precision regions)\n");
  } else {
    std::printf("no fix found in %zu trial%s: keeping the routed modules in float32 does not make these %lld steps "
                "healthy; lower optimizer.lr, check the loss scaler's options, or try amp_bf16 (docs/precision.md)\n",
                d.trials.size(), d.trials.size() == 1 ? "" : "s", static_cast<long long>(options.steps));
  }
}

void print_table(const Diagnosis& d, const diagnose::DiagnoseOptions& options) {
  print_summary(d);
  print_modules(d.observed);
  print_gradients(d.observed);
  print_float8(d);
  std::printf("\n");
  print_verdict(d, options);
}

using nlohmann::json;

json steps_json(const diagnose::Observations& o) {
  const auto finite_or_null = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json steps = json::array();
  for (const auto& s : o.steps) {
    steps.push_back({{"step", s.step}, {"loss", finite_or_null(s.loss)}, {"loss_scale", s.loss_scale}, {"applied", s.applied}});
  }
  return steps;
}

json modules_json(const diagnose::Observations& o) {
  json modules = json::array();
  for (const auto& [name, c] : o.modules) {
    modules.push_back({{"name", name},
                       {"values", c.values},
                       {"abs_max", c.abs_max},
                       {"beyond_float16", c.beyond_float16},
                       {"below_float16_normal", c.below_float16_normal},
                       {"nonfinite", c.nonfinite}});
  }
  return modules;
}

json parameters_json(const diagnose::Observations& o) {
  json parameters = json::array();
  for (const auto& [name, c] : o.parameters) {
    parameters.push_back({{"name", name}, {"nonzero", c.nonzero}, {"flushed", c.flushed}, {"flushed_fraction", c.fraction()}});
  }
  return parameters;
}

// One float8 layer's counts, by operand.
json float8_casts_json(const std::array<diagnose::Float8CastCounts, 3>& by_operand) {
  json operands;
  const char* names[] = {"input", "weight", "grad_output"};
  for (std::size_t i = 0; i < by_operand.size(); ++i) {
    const diagnose::Float8CastCounts& c = by_operand[i];
    operands[names[i]] = {{"values", c.values},
                          {"nonzero", c.nonzero},
                          {"underflow", c.underflow},
                          {"saturated", c.saturated},
                          {"underflow_fraction", c.underflow_fraction()},
                          {"saturated_fraction", c.saturated_fraction()}};
  }
  return operands;
}

json float8_layers_json(const diagnose::Observations& o) {
  json float8_layers = json::array();
  for (const diagnose::Float8Layer& layer : o.float8_layers) {
    json entry = float8_casts_json(layer.judged());
    entry["name"] = layer.name;
    entry["first_step"] = float8_casts_json(layer.first_step);
    entry["keep_in_bfloat16"] = diagnose::keep_in_bfloat16(layer);
    float8_layers.push_back(entry);
  }
  return float8_layers;
}

json trials_json(const Diagnosis& d) {
  json trials = json::array();
  for (const auto& t : d.trials) {
    trials.push_back({{"fp32_modules", t.fp32_modules}, {"steps", t.steps}, {"skipped", t.skipped},
                      {"losses_finite", t.losses_finite}, {"healthy", t.healthy}});
  }
  return trials;
}

json to_json(const Diagnosis& d, int exit_code) {
  json report = {{"recipe", d.recipe},
                 {"policy", d.policy},
                 {"device", d.device},
                 {"recipe_fp32_modules", d.recipe_fp32_modules},
                 {"steps", steps_json(d.observed)},
                 {"skipped", d.observed.skipped()},
                 {"modules", modules_json(d.observed)},
                 {"parameters", parameters_json(d.observed)},
                 {"first_nonfinite", nullptr},
                 {"stopped", d.stopped ? json(*d.stopped) : json(nullptr)},
                 {"healthy", d.healthy},
                 {"trials", trials_json(d)},
                 {"fix", nullptr},
                 {"recipe_fp8_exclude", d.recipe_fp8_exclude},
                 {"float8_layers", float8_layers_json(d.observed)},
                 {"float8_limits",
                  {{"underflow_fraction", diagnose::kFloat8UnderflowLimit},
                   {"saturated_fraction", diagnose::kFloat8SaturationLimit}}},
                 {"fp8_exclude", nullptr},
                 {"exit_code", exit_code}};
  if (d.observed.first_nonfinite) {
    report["first_nonfinite"] = {{"module", d.observed.first_nonfinite->module}, {"step", d.observed.first_nonfinite->step}};
  }
  if (d.fix) {
    report["fix"] = {{"fp32_modules", *d.fix}, {"recipe_line", diagnose::fp32_modules_line(*d.fix)}, {"minimal", d.fix_minimal}};
  }
  if (d.fp8_exclude) {
    report["fp8_exclude"] = {{"modules", *d.fp8_exclude}, {"recipe_line", diagnose::fp8_exclude_line(*d.fp8_exclude)}};
  }
  return report;
}

}  // namespace

int diagnose(const std::string& recipe, const std::vector<std::string>& overrides,
             const diagnose::DiagnoseOptions& options, bool json) {
  if (options.steps < 1) throw usage_error("--steps must be at least 1");
  if (options.max_trials < 0) throw usage_error("--max-trials must not be negative");
  if (!(options.max_skipped_fraction >= 0 && options.max_skipped_fraction <= 1)) {
    throw usage_error("--max-skipped must lie in [0, 1]");
  }
  Session session;
  std::fprintf(stderr, "mixt diagnose: %lld steps of %s as written ...\n", static_cast<long long>(options.steps),
               recipe.c_str());
  const Diagnosis d = diagnose::diagnose(session, recipe, overrides, options, [](const std::string& line) {
    std::fprintf(stderr, "mixt diagnose: %s\n", line.c_str());
  });
  const int exit_code = d.healthy || d.fix ? 0 : 1;
  if (json) {
    std::printf("%s\n", to_json(d, exit_code).dump(2).c_str());
  } else {
    print_table(d, options);
  }
  return exit_code;
}

void add_diagnose_command(CLI::App& app, Commands& commands) {
  struct Arguments {
    std::string recipe;
    std::vector<std::string> overrides;
    diagnose::DiagnoseOptions options;
    bool json = false;
  };
  auto args = std::make_shared<Arguments>();
  diagnose::DiagnoseOptions& o = args->options;
  CLI::App* command = app.add_subcommand(
      "diagnose", "find where a recipe's precision overflows or underflows (float16, float8), and the fix");
  command->add_option("recipe", args->recipe, "recipe YAML file")->required();
  command->add_option("--steps", o.steps, "optimizer steps per run")->capture_default_str();
  command->add_option("--max-trials", o.max_trials, "runs the fp32_modules search may make")->capture_default_str();
  command->add_option("--max-skipped", o.max_skipped_fraction,
                      "a run skipping more than this fraction of its steps is unhealthy")
      ->capture_default_str();
  command->add_flag("--json", args->json, "the report as JSON on stdout");
  command->add_option("overrides", args->overrides, "key=value overrides");
  commands.push_back({command, [args] { return diagnose(args->recipe, args->overrides, args->options, args->json); }});
}

}  // namespace mixt::cli
