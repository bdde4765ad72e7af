// callbacks/early_stopping — ends the run when a validation figure stops improving
// (Lightning's EarlyStopping, MMEngine's EarlyStoppingHook).
//
// After each epoch's evaluation: an improvement is a value better than the best so far by
// more than min_delta (lower for mode min, higher for max); patience epochs in a row
// without one end the run through EpochEnd::control, a normal end (exit 0) after that
// epoch's checkpoint. Its best value and count are kept in checkpoints, so a resumed run
// goes on counting. The evaluation is summed over ranks: every rank decides alike.
#include <mixt/callback.h>
#include <mixt/error.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <cmath>
#include <cstdio>

#include "../common/monitor.h"

namespace {

using mixt::callbacks::Monitor;

struct EarlyStoppingOptions {
  mixt::callbacks::MonitorOptions monitor;
  std::int64_t patience = 3;
  double min_delta = 0.0;
};

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

class EarlyStopping final : public mixt::Callback {
 public:
  EarlyStopping(Monitor monitor, std::int64_t patience, double min_delta)
      : monitor_(std::move(monitor)), patience_(patience), min_delta_(min_delta) {}

  void on_epoch_end(const mixt::EpochEnd& epoch) override {
    const std::optional<double> value = monitor_.value(epoch);
    if (!value) {
      if (!warned_) {
        mixt::warn("early_stopping: no evaluation reports " + monitor_.name +
                   " (no validation data, or no callback evaluates those weights): it never stops the run");
      }
      warned_ = true;
      return;
    }
    if (monitor_.improves(*value, best_, min_delta_)) {
      best_ = *value;
      best_epoch_ = epoch.state.epoch + 1;
      wait_ = 0;
      return;
    }
    if (++wait_ < patience_) return;
    const std::string by = min_delta_ > 0 ? " by more than " + number(min_delta_) : "";
    epoch.control.request_stop(monitor_.name + " did not improve" + by + " for " + std::to_string(wait_) +
                               (wait_ == 1 ? " epoch" : " epochs") + " (best " + number(best_) + " after epoch " +
                               std::to_string(best_epoch_) + ")");
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    archive.write("best", c10::IValue(best_));
    archive.write("best_epoch", c10::IValue(best_epoch_));
    archive.write("wait", c10::IValue(wait_));
  }
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue value;
    if (archive.try_read("best", value)) best_ = value.toDouble();
    if (archive.try_read("best_epoch", value)) best_epoch_ = value.toInt();
    if (archive.try_read("wait", value)) wait_ = value.toInt();
  }

 private:
  Monitor monitor_;
  std::int64_t patience_;
  double min_delta_;
  double best_ = NAN;            // none yet
  std::int64_t best_epoch_ = 0;  // 1-based
  std::int64_t wait_ = 0;        // epochs since the best
  bool warned_ = false;
};

using O = EarlyStoppingOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .include(&O::monitor, mixt::callbacks::kMonitorOptions)
        .add(&O::patience, "patience", "epochs in a row without an improvement before the run ends", mixt::at_least(1))
        .add(&O::min_delta, "min_delta", "how much better than the best an improvement must be", mixt::at_least(0));

std::unique_ptr<mixt::Callback> make_early_stopping(const EarlyStoppingOptions& o, const mixt::CallbackContext& context) {
  return std::make_unique<EarlyStopping>(o.monitor.watched(context.task_figures), o.patience, o.min_delta);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_callback("early_stopping",
                         "ends the run when a validation figure has not improved for `patience` epochs (exit 0, "
                         "after that epoch's checkpoint)",
                         kOptions, make_early_stopping);
}

}  // namespace

MIXT_PLUGIN("early_stopping", "1.0.0", register_components)
