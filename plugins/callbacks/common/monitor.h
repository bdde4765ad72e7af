// What early_stopping and best_checkpoint watch: a figure an epoch's evaluation reports
// (metrics.jsonl's names: val_loss and the task's val_<figure>, e.g. val_top1, val_top5 or
// val_perplexity, and with a callback's weights val_top1_ema), and whether lower or higher
// is better.
#pragma once

#include <mixt/callback.h>
#include <mixt/options.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace mixt::callbacks {

struct Monitor {
  std::string name;     // "val_top1_ema"
  std::string figure;   // "loss" or one of the task's: "top1", "top5" (the top-k figure: top-4 with four classes)
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
    if (figure == "loss") return found->loss;
    for (const Figure& reported : found->figures) {
      if (reported.name == figure) return reported.value;
    }
    return std::nullopt;
  }
  // Whether `value` is better than `best` by more than `min_delta` (NaN never is).
  bool improves(double value, double best, double min_delta) const {
    if (std::isnan(value)) return false;
    if (std::isnan(best)) return true;
    return minimize ? value < best - min_delta : value > best + min_delta;
  }
  const char* mode() const { return minimize ? "min" : "max"; }
};

// "val_" + a figure, optionally "_" + the weights' name: checked against the task's figures
// when the callback is built (MonitorOptions::watched).
inline std::optional<std::string> monitor_problem(const std::string& name) {
  if (name.rfind("val_", 0) == 0 && name.size() > 4) return std::nullopt;
  return "expected val_loss or one of the task's figures (val_top1, val_top5; val_perplexity for causal_lm), "
         "optionally with a callback's weights (val_top1_ema), got '" + name + "'";
}

// The recipe's `monitor` and `mode`, as a callback declares them (.include(&S::monitor,
// kMonitorOptions)); watched() is the Monitor they name.
struct MonitorOptions {
  enum class Mode { automatic, min, max };
  std::string monitor = "val_loss";
  Mode mode = Mode::automatic;
  RecipeSection where;

  // `figures`: the task's (CallbackContext::task_figures). A name none of them (nor the
  // loss) starts is a recipe error at `monitor`. None (a callback built outside a run, as
  // tests do): the name's first word after val_ is the figure, better higher unless a loss.
  Monitor watched(const std::vector<Figure>& figures) const {
    if (figures.empty()) {
      const std::string rest = monitor.substr(4);
      Figure guessed;
      guessed.name = rest.substr(0, rest.find('_'));
      guessed.higher_is_better = guessed.name != "loss";
      return watched({guessed});
    }
    Figure loss;
    loss.name = "loss";
    loss.higher_is_better = false;
    std::vector<Figure> known = figures;
    known.insert(known.begin(), loss);
    const std::string rest = monitor.substr(4);  // after "val_"
    const Figure* chosen = nullptr;
    for (const Figure& figure : known) {
      const bool fits = rest == figure.name || (rest.rfind(figure.name + "_", 0) == 0 && rest.size() > figure.name.size() + 1);
      if (fits && (!chosen || figure.name.size() > chosen->name.size())) chosen = &figure;
    }
    if (!chosen) {
      std::string names;
      for (const Figure& figure : known) names += (names.empty() ? "val_" : ", val_") + figure.name;
      where.fail("monitor", "the task reports no figure '" + monitor + "'",
                 "known: " + names + ", each optionally with a callback's weights (val_loss_ema)");
    }
    Monitor m;
    m.name = monitor;
    m.figure = chosen->name;
    if (rest.size() > chosen->name.size()) m.weights = rest.substr(chosen->name.size() + 1);
    m.minimize = mode == Mode::automatic ? !chosen->higher_is_better : mode == Mode::min;
    return m;
  }
};

inline const OptionsOf<MonitorOptions> kMonitorOptions =
    OptionsOf<MonitorOptions>()
        .add(&MonitorOptions::monitor, "monitor",
             "the figure watched: val_loss or the task's (val_top1, val_top5; val_perplexity), with a callback's "
             "weights val_loss_ema",
             [](const std::string& name) { return monitor_problem(name); })
        .choice(&MonitorOptions::mode, "mode",
                {{"auto", MonitorOptions::Mode::automatic},
                 {"min", MonitorOptions::Mode::min},
                 {"max", MonitorOptions::Mode::max}},
                "min or max: which way is better (auto: the figure's own, min for a loss)")
        .recipe_section(&MonitorOptions::where);

}  // namespace mixt::callbacks
