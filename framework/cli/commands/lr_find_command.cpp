#include "commands/lr_find_command.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "experiment/session.h"
#include "files/output_files.h"
#include "mixt/error.h"
#include "process/interruptible_start.h"
#include "reports/lr_curve_plot.h"
#include "train/lr_finder.h"

namespace mixt::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json finite_or_null(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

void check_options(const LrFindOptions& o) {
  if (!(o.min_lr > 0) || !std::isfinite(o.min_lr)) throw usage_error("--min must be a positive learning rate");
  if (!(o.max_lr > o.min_lr) || !std::isfinite(o.max_lr)) throw usage_error("--max must be above --min");
  if (o.steps < 2) throw usage_error("--steps must be at least 2", "the default, 100, suits most recipes");
  check_writable("--json", o.json);
  check_writable("--png", o.png);
  const std::string extension = fs::path(o.png).extension().string();
  if (!o.png.empty() && extension != ".png" && extension != ".PNG") {
    throw usage_error("--png " + o.png + ": the plot is a PNG file", "name a file ending in .png");
  }
  if (!o.png.empty()) check_lr_curves_drawable(o.png);
}

// Every step; "skipped" ones (the policy's) and the diverging one have "plotted": false.
json curve_json(const LrFindOptions& o, const LrFindResult& result, const std::optional<LrRangePoint>& suggested,
                const std::string& recipe_name, const std::string& policy, const std::vector<LrRangePoint>& plotted,
                const LrPlotFrame& frame) {
  const LrRangeTest& test = result.test;
  std::set<std::int64_t> drawn;
  for (const LrRangePoint& p : plotted) drawn.insert(p.step);
  json points = json::array();
  for (const LrRangePoint& p : test.points()) {
    json point = {{"step", p.step}, {"lr", p.lr}, {"loss", finite_or_null(p.loss)}};
    if (p.skipped) {
      point["skipped"] = true;
    } else {
      point["smoothed_loss"] = finite_or_null(p.smoothed);
    }
    point["plotted"] = drawn.count(p.step) > 0;
    points.push_back(point);
  }
  json report = {{"recipe", o.recipe},
                 {"name", recipe_name},
                 {"precision", policy},
                 {"min_lr", o.min_lr},
                 {"max_lr", o.max_lr},
                 {"steps", o.steps},
                 {"beta", 0.98},
                 {"divergence_factor", 4.0},
                 {"stopped", test.diverged()       ? "diverged"
                             : result.data_ran_out ? "too_many_skipped"
                                                   : "done"},
                 {"applied", test.applied_steps()},
                 {"skipped", test.skipped_steps()},
                 {"points", points},
                 {"suggestion", nullptr},
                 {"plot",
                  {{"width", frame.width},
                   {"height", frame.height},
                   {"left", frame.left},
                   {"top", frame.top},
                   {"right", frame.right},
                   {"bottom", frame.bottom},
                   {"log10_lr_min", frame.log10_lr_min},
                   {"log10_lr_max", frame.log10_lr_max},
                   {"loss_min", frame.loss_min},
                   {"loss_max", frame.loss_max}}}};
  if (suggested) {
    report["suggestion"] = {{"step", suggested->step},
                            {"lr", suggested->lr},
                            {"smoothed_loss", suggested->smoothed},
                            {"override", "optimizer.lr=" + short_lr(suggested->lr)}};
  }
  return report;
}

// The name of the recipe's precision policy, as its component record has it.
std::string precision_policy(const Experiment& e) {
  std::string policy;
  for (const ComponentRecord& record : e.facts.records) {
    if (record.kind == "precision") policy = record.name;
  }
  return policy;
}

// The smoothed loss against log lr, the suggestion marked.
void write_plot(const std::string& png, const std::vector<LrRangePoint>& plotted,
                const std::optional<LrRangePoint>& suggested, const LrPlotFrame& frame, const std::string& recipe_name,
                const std::string& policy) {
  LrCurvePlot plot;
  for (const LrRangePoint& p : plotted) plot.points.emplace_back(p.lr, p.smoothed);
  if (suggested) plot.suggestion = std::make_pair(suggested->lr, suggested->smoothed);
  plot.frame = frame;
  plot.title = "mixt lr-find: " + recipe_name + " (" + policy + "), smoothed training loss";
  write_lr_curve_plot(png, plot);
}

// How the ramp ended, where the curve and plot went, and the suggested learning rate.
void print_outcome(const LrFindOptions& options, const LrFindResult& result, const fs::path& json_file,
                   const std::optional<LrRangePoint>& suggested) {
  const LrRangeTest& test = result.test;
  const std::string ended = test.diverged()       ? "the loss diverged at lr " + short_lr(test.points().back().lr)
                            : result.data_ran_out ? "stopped: the policy skipped as many steps as it applied"
                                                  : "the ramp reached --max";
  std::printf("%lld steps (%lld skipped); %s\n", static_cast<long long>(test.points().size()),
              static_cast<long long>(test.skipped_steps()), ended.c_str());
  std::printf("curve: %s\n", json_file.string().c_str());
  if (!options.png.empty()) std::printf("plot: %s\n", options.png.c_str());
  if (!suggested) {
    std::printf("no suggestion: fewer than 12 applied steps with a finite loss; raise --steps or lower --max\n");
    return;
  }
  std::printf("suggested: optimizer.lr=%s\n", short_lr(suggested->lr).c_str());
}

}  // namespace

std::string short_lr(double lr) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1e", lr);  // "3.2e-03"
  std::string s = text;
  const auto e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
  const bool negative = exponent[0] == '-';
  exponent = exponent.substr(exponent[0] == '-' || exponent[0] == '+' ? 1 : 0);
  while (exponent.size() > 1 && exponent[0] == '0') exponent.erase(0, 1);
  if (mantissa.size() > 2 && mantissa.compare(mantissa.size() - 2, 2, ".0") == 0) mantissa.resize(mantissa.size() - 2);
  return mantissa + "e" + (negative ? "-" : "") + exponent;
}

int lr_find(const LrFindOptions& options) {
  check_options(options);
  Session session;
  Experiment e = prepare_interruptibly(session, options.recipe, options.overrides,
                                       "mixt: stopping the range test (again to quit at once)", "the range test");
  const bool main_rank = e.main_rank();
  if (main_rank && !e.options.resume.empty()) {
    warn("trainer.resume is not used by the range test (" + e.options.resume +
         "): it starts from the recipe's model, with model.weights if set; to test from a run's weights, "
         "mixt export that run and set model.weights to the file");
  }
  const std::string policy = precision_policy(e);
  const fs::path json_file =
      !options.json.empty() ? fs::path(options.json) : e.facts.output / "lr-find" / (e.facts.name + ".json");
  const LrRamp ramp{options.min_lr, options.max_lr, options.steps};
  if (main_rank) {
    std::fprintf(stderr, "mixt lr-find: %lld steps of %s, lr %s to %s (precision %s%s) ...\n",
                 static_cast<long long>(options.steps), options.recipe.c_str(), short_lr(options.min_lr).c_str(),
                 short_lr(options.max_lr).c_str(), policy.c_str(),
                 e.parallel ? (", " + std::to_string(e.parallel->world_size()) + " ranks").c_str() : "");
  }
  const auto progress = [&](const LrRangeTest& test) {
    const LrRangePoint& p = test.points().back();
    if (!main_rank || (p.step % 10 != 0 && !test.finished())) return;
    std::fprintf(stderr, "  step %4lld  lr %-8s loss %-9.4g smoothed %.4g%s\n", static_cast<long long>(p.step),
                 short_lr(p.lr).c_str(), p.loss, p.smoothed, p.skipped ? " (skipped)" : "");
  };
  const LrFindResult result = find_learning_rate(e.components, e.facts, e.options, e.parallel.get(), ramp, progress);
  if (!main_rank) return 0;  // rank 0 writes and reports

  const std::vector<LrRangePoint> applied = applied_points(result.test.points());
  const std::optional<std::size_t> index = suggestion_index(applied);
  const std::optional<LrRangePoint> suggested = index ? std::optional(applied[*index]) : std::nullopt;
  const std::vector<LrRangePoint> plotted = plotted_points(result.test);
  const LrPlotFrame frame = plot_frame(plotted);
  std::error_code ec;
  fs::create_directories(json_file.parent_path().empty() ? fs::path(".") : json_file.parent_path(), ec);
  write_file(json_file, curve_json(options, result, suggested, e.facts.name, policy, plotted, frame).dump(2) + "\n");
  if (!options.png.empty()) write_plot(options.png, plotted, suggested, frame, e.facts.name, policy);
  print_outcome(options, result, json_file, suggested);
  return 0;
}

void add_lr_find_command(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<LrFindOptions>();
  CLI::App* command = app.add_subcommand(
      "lr-find", "learning-rate range test: an exponential lr ramp from the recipe's start, the suggested lr");
  command->add_option("recipe", o->recipe, "recipe YAML file")->required();
  command->add_option("overrides", o->overrides, "key=value overrides, as for mixt run");
  command->add_option("--min", o->min_lr, "the ramp's first learning rate")->capture_default_str();
  command->add_option("--max", o->max_lr, "its last")->capture_default_str();
  command->add_option("--steps", o->steps, "optimizer steps of the ramp (skipped ones not counted)")
      ->capture_default_str();
  command->add_option("--json", o->json, "write the curve to FILE (default: <output>/lr-find/<name>.json)");
  command->add_option("--png", o->png, "draw the smoothed loss against log lr, suggestion marked, as a PNG");
  commands.push_back({command, [o] { return lr_find(*o); }});
}

}  // namespace mixt::cli
