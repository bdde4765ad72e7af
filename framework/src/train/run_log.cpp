#include "train/run_log.h"

#include <cstdio>
#include <cstring>

namespace mixt {

void RunLog::on_epoch_start(const EpochStart& epoch) {
  progress_.start_epoch(epoch.state.epoch, epoch.state.epochs, epoch.steps_in_epoch, epoch.first_step);
}

void RunLog::on_step_end(const StepEnd& step) {
  // wants() throttles terminal redraws, so ask it once per step.
  const bool show = progress_.wants(step.epoch_step);
  if (!show && !(step.logged && run_)) return;
  const double loss = step.loss.item<double>();
  const double samples_per_second = static_cast<double>(step.epoch_samples) / step.epoch_seconds;
  auto metrics = step.precision.metrics();  // the policy's own numbers, e.g. loss_scale
  metrics.emplace_back("skipped_steps", static_cast<double>(step.state.skipped_steps));
  if (show) progress_.show(step.epoch_step, loss, samples_per_second, metrics);
  if (!step.logged || !run_) return;
  nlohmann::json line = {{"event", "step"},
                         {"epoch", step.state.epoch + 1},
                         {"step", step.state.global_step},
                         {"epoch_step", step.epoch_step},
                         {"loss", loss},
                         {"lr", step.learning_rate},
                         {"samples_per_s", samples_per_second},
                         {"epoch_elapsed_s", step.epoch_seconds}};
  for (const auto& [name, value] : metrics) line[name] = value;
  run_->append_metrics(line);
}

// Every epoch ends with a line (terminal and log.txt) and an "epoch" event in
// metrics.jsonl, with the validation figures when there is validation data.
void RunLog::on_epoch_end(const EpochEnd& epoch) {
  const auto number = static_cast<long long>(epoch.state.epoch + 1);
  const auto epochs = static_cast<long long>(epoch.state.epochs);
  char line[256];
  nlohmann::json event = {{"event", "epoch"}, {"epoch", number}, {"step", epoch.state.global_step}};
  if (const Evaluation* eval = epoch.evaluation) {
    std::snprintf(line, sizeof(line), "epoch %lld/%lld: val loss %.4f, val top-1 %.2f%% (%lld samples), %.1fs", number,
                  epochs, eval->loss, 100.0 * eval->top1, static_cast<long long>(eval->samples),
                  epoch.elapsed_seconds);
    event["val_loss"] = eval->loss;
    event["val_top1"] = eval->top1;
  } else {
    std::snprintf(line, sizeof(line), "epoch %lld/%lld done, %.1fs", number, epochs, epoch.elapsed_seconds);
  }
  // Skipped samples are named once in a warning; their count goes with every epoch.
  if (epoch.bad_samples > 0) {
    const std::size_t used = std::strlen(line);
    std::snprintf(line + used, sizeof(line) - used, ", %lld bad samples skipped",
                  static_cast<long long>(epoch.bad_samples));
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
