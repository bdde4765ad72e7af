#include "commands/run_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "common/interrupt.h"
#include "experiment/experiment.h"
#include "experiment/session.h"
#include "process/interruptible_start.h"
#include "train/figure_text.h"

namespace mixt::cli {

namespace fs = std::filesystem;

int run(const std::string& recipe, const std::vector<std::string>& overrides) {
  // Training one step for a checkpoint of nothing would only make the user wait.
  Session session;
  Experiment experiment = prepare_interruptibly(session, recipe, overrides, kStopBeforeTraining, "training started");
  set_interrupt_acknowledgement(launched_as_main_rank() ? kStopAfterStep : nullptr);
  fs::path run_dir;
  const TrainResult result = run_experiment(experiment, ::isatty(STDERR_FILENO) != 0, &run_dir);
  if (!experiment.main_rank()) return 0;  // rank 0 reports
  // samples/s over the training loops, as the step lines show it; evaluation and
  // checkpoints are in the total only.
  const std::string stopped =
      result.stopped_early ? "; stopped early by " + result.stopped_early->by + ": " + result.stopped_early->reason
                           : "";
  const double samples_per_second =
      result.train_seconds > 0 ? static_cast<double>(result.samples) / result.train_seconds : 0.0;
  // A task whose samples hold several predictions (tokens of a window) gives its rate in them.
  char rate[128];
  if (const std::optional<Throughput>& unit = result.throughput) {
    std::snprintf(rate, sizeof(rate), "%lld %s, %.1fs training (%.0f %s/s)",
                  static_cast<long long>(result.samples * unit->per_sample), unit->unit.c_str(), result.train_seconds,
                  samples_per_second * static_cast<double>(unit->per_sample), unit->unit.c_str());
  } else {
    std::snprintf(rate, sizeof(rate), "%.1fs training (%.0f samples/s)", result.train_seconds, samples_per_second);
  }
  std::printf("done: %lld optimizer steps (%lld skipped), %lld samples, %s, %.1fs in all%s\n",
              static_cast<long long>(result.optimizer_steps), static_cast<long long>(result.skipped_steps),
              static_cast<long long>(result.samples), rate, result.elapsed_seconds, stopped.c_str());
  if (result.bad_samples > 0) {
    std::printf("skipped %lld bad samples (undecodable files; the warnings above name the first)\n",
                static_cast<long long>(result.bad_samples));
  }
  if (result.final_eval) {
    const Evaluation& eval = *result.final_eval;
    const std::string task_line = experiment.components.task->summary(eval.loss, eval.figures);
    if (!task_line.empty()) {
      std::printf("%s\n", task_line.c_str());
    } else {
      const std::string figures = figures_text(eval.figures);
      std::printf("validation: loss %.4f%s%s\n", eval.loss, figures.empty() ? "" : ", ", figures.c_str());
    }
  }
  if (!run_dir.empty()) std::printf("run directory: %s\n", run_dir.string().c_str());
  return 0;
}
void add_run_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<RecipeArguments>();
  CLI::App* run_app = app.add_subcommand("run", "train the model a recipe describes");
  run_app->add_option("recipe", args->recipe, "recipe YAML file")->required();
  run_app->add_option("overrides", args->overrides, "key=value overrides, e.g. optimizer.lr=0.1 trainer.epochs=2");
  commands.push_back({run_app, [args] { return run(args->recipe, args->overrides); }});
}

}  // namespace mixt::cli
