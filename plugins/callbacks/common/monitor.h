// What early_stopping and best_checkpoint watch: a figure an epoch's evaluation reports
// (metrics.jsonl's names: val_loss, val_top1, val_top5, and with a callback's weights
// val_top1_ema), and whether lower or higher is better.
#pragma once

#include <mixt/callback.h>
#include <mixt/options.h>

#include <cmath>
#include <optional>
#include <string>

namespace mixt::callbacks {

struct Monitor {
  std::string name;     // "val_top1_ema"
  std::string figure;   // "loss", "top1" or "top5" (the top-k figure: top-4 with four classes)
  std::string weights;  // "" for the model's own, else a callback's evaluated weights ("ema")
  bool minimize = true;

  // The figure in this epoch's evaluations; empty when none reports it (no validation data,
  // no callback evaluates those weights).
  std::optional<double> value(const EpochEnd& epoch) const {
    const Evaluation* found = weights.empty() ? epoch.evaluation : nullptr;
    for (const Evaluation& other : epoch.other_weights) {
      if (!weights.empty() && other.weights == weights) found = &other;
    }
    if (!found) return std::nullopt;
    return figure == "loss" ? found->loss : figure == "top1" ? found->top1 : found->top_k_accuracy;
  }
  // Whether `value` is better than `best` by more than `min_delta` (NaN never is).
  bool improves(double value, double best, double min_delta) const {
    if (std::isnan(value)) return false;
    if (std::isnan(best)) return true;
    return minimize ? value < best - min_delta : value > best + min_delta;
  }
  const char* mode() const { return minimize ? "min" : "max"; }
};

// "val_" + loss|top1|top5, optionally "_" + the weights' name.
inline std::optional<std::string> monitor_problem(const std::string& name) {
  for (const char* figure : {"val_loss", "val_top1", "val_top5"}) {
    const std::string prefix = figure;
    if (name == prefix || (name.rfind(prefix + "_", 0) == 0 && name.size() > prefix.size() + 1)) return std::nullopt;
  }
  return "expected val_loss, val_top1 or val_top5, or one of them with a callback's weights (val_top1_ema), got '" +
         name + "'";
}

// The recipe's `monitor` and `mode`, as a callback declares them (.include(&S::monitor,
// kMonitorOptions)); watched() is the Monitor they name.
struct MonitorOptions {
  enum class Mode { automatic, min, max };
  std::string monitor = "val_loss";
  Mode mode = Mode::automatic;

  Monitor watched() const {
    Monitor m;
    m.name = monitor;
    const std::string rest = m.name.substr(4);  // after "val_"
    m.figure = rest.substr(0, 4);               // loss, top1, top5
    if (rest.size() > 5) m.weights = rest.substr(5);
    m.minimize = mode == Mode::automatic ? m.figure == "loss" : mode == Mode::min;
    return m;
  }
};

inline const OptionsOf<MonitorOptions> kMonitorOptions =
    OptionsOf<MonitorOptions>()
        .add(&MonitorOptions::monitor, "monitor",
             "the figure watched: val_loss, val_top1, val_top5, or with a callback's weights val_loss_ema",
             [](const std::string& name) { return monitor_problem(name); })
        .choice(&MonitorOptions::mode, "mode",
                {{"auto", MonitorOptions::Mode::automatic},
                 {"min", MonitorOptions::Mode::min},
                 {"max", MonitorOptions::Mode::max}},
                "min or max: which way is better (auto: min for a loss, else max)");

}  // namespace mixt::callbacks
