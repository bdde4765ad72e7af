#include "train/run_log.h"

#include <cstdio>
#include <optional>
#include <string>

#include "train/figure_text.h"

namespace mixt {

std::unique_ptr<WarningLog> RunLog::capture_warnings() const {
  if (!run_) return nullptr;
  return std::make_unique<WarningLog>([run = run_](const std::string& line) {
    run->append_log(line);
    const std::string prefix = "mixt: warning: ";
    const std::string message = line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : line;
    run->append_metrics({{"event", "warning"}, {"message", message}});
  });
}

void RunLog::stopped_early(const StopRequest& request, const TrainState& state, const std::string& where) const {
  const std::string line = "stopped early by " + request.by + ": " + request.reason + " (" + where + ")";
  progress_.note(line);
  if (!run_) return;
  run_->append_log(line);
  run_->append_metrics({{"event", "stop"},
                        {"by", request.by},
                        {"reason", request.reason},
                        {"when", stop_when_name(request.when)},
                        {"epoch", state.epoch + 1},
                        {"step", state.global_step}});
}

void RunLog::on_epoch_start(const EpochStart& epoch) {
  progress_.start_epoch(epoch.state.epoch, epoch.state.epochs, epoch.steps_in_epoch, epoch.first_step);
}

void RunLog::on_step_end(const StepEnd& step) {
  // wants() throttles terminal redraws, so ask it once per step.
  const bool show = progress_.wants(step.epoch_step);
  if (!show && !(step.logged && run_)) return;
  // The loss and the gradient norm in one copy when both are on one device.
  double loss = 0;
  std::optional<double> grad_norm;
  if (step.grad_norm.defined() && step.grad_norm.device() == step.loss.device()) {
    const at::Tensor both = at::stack({step.loss.to(at::kDouble), step.grad_norm.to(at::kDouble)}).cpu();
    loss = both[0].item<double>();
    grad_norm = both[1].item<double>();
  } else {
    loss = step.loss.item<double>();
    if (step.grad_norm.defined()) grad_norm = step.grad_norm.item<double>();
  }
  if (settle_) settle_();
  const double samples_per_second = static_cast<double>(step.epoch_samples) / step.epoch_seconds;
  auto metrics = step.precision.metrics();  // the policy's own numbers, e.g. loss_scale
  metrics.emplace_back("skipped_steps", static_cast<double>(step.state.skipped_steps));
  if (grad_norm) metrics.emplace_back("grad_norm", *grad_norm);
  const double predictions_per_second =
      throughput_ ? samples_per_second * static_cast<double>(throughput_->per_sample) : samples_per_second;
  if (show) {
    if (throughput_) {
      progress_.show(step.epoch_step, loss, predictions_per_second, throughput_->unit.c_str(), metrics);
    } else {
      progress_.show(step.epoch_step, loss, samples_per_second, "samples", metrics);
    }
  }
  if (!step.logged || !run_) return;
  nlohmann::json line = {{"event", "step"},
                         {"epoch", step.state.epoch + 1},
                         {"step", step.state.global_step},
                         {"epoch_step", step.epoch_step},
                         {"loss", loss},
                         {"lr", step.learning_rate},
                         {"samples_per_s", samples_per_second},
                         {"epoch_elapsed_s", step.epoch_seconds}};
  if (throughput_) line[throughput_->unit + "_per_s"] = predictions_per_second;
  for (const auto& [name, value] : metrics) line[name] = value;
  run_->append_metrics(line);
}

namespace {
// ", val loss 0.4012, top-1 91.20%, top-5 99.10%" and the metrics.jsonl fields (val_loss,
// val_<figure>), suffixed with the weights' name for a callback's weights ("val_top1_ema").
std::string describe(const Evaluation& eval, nlohmann::json& event) {
  const std::string suffix = eval.weights.empty() ? "" : "_" + eval.weights;
  event["val_loss" + suffix] = eval.loss;
  for (const Figure& figure : eval.figures) event["val_" + figure.name + suffix] = figure.value;
  char loss[64];
  std::snprintf(loss, sizeof(loss), "val loss %.4f", eval.loss);
  const std::string figures = figures_text(eval.figures);
  return (eval.weights.empty() ? "" : eval.weights + " ") + loss + (figures.empty() ? "" : ", " + figures);
}
}  // namespace

// Every epoch ends with a line (terminal and log.txt) and an "epoch" event in
// metrics.jsonl, with the validation figures when there is validation data.
void RunLog::on_epoch_end(const EpochEnd& epoch) {
  const auto number = static_cast<long long>(epoch.state.epoch + 1);
  const auto epochs = static_cast<long long>(epoch.state.epochs);
  nlohmann::json event = {{"event", "epoch"}, {"epoch", number}, {"step", epoch.state.global_step}};
  std::string line = "epoch " + std::to_string(number) + "/" + std::to_string(epochs);
  if (const Evaluation* eval = epoch.evaluation) {
    line += ": " + describe(*eval, event) + " (" + std::to_string(eval->samples) + " samples)";
    for (const Evaluation& other : epoch.other_weights) line += "; " + describe(other, event);
  } else {
    line += " done";
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), ", %.1fs", epoch.elapsed_seconds);
  line += seconds;
  // Skipped samples are named once in a warning; their count goes with every epoch.
  if (epoch.bad_samples > 0) {
    line += ", " + std::to_string(epoch.bad_samples) + " bad samples skipped";
    event["bad_samples"] = epoch.bad_samples;
  }
  event["elapsed_s"] = epoch.elapsed_seconds;
  progress_.end_epoch(line);
  if (run_) {
    run_->append_log(line);
    run_->append_metrics(event);
  }
}

}  // namespace mixt
