// callbacks/tensorboard — the run's curves as TensorBoard event files in its run directory.
//
// Writes what metrics.jsonl holds, at the same steps (trainer.log_every) and with the same
// values (as float32, TensorBoard's scalar type): the step's train/* figures, the epoch's
// val/* and data/bad_samples, the CUDA allocator's peak; opt-in histograms of per-layer
// gradient and weight norms; the resolved recipe as text. Rank 0 writes; a resumed run adds
// a new file whose steps continue the checkpoint's, so TensorBoard draws one curve.
#include <ATen/DeviceAccelerator.h>
#include <mixt/callback.h>
#include <mixt/error.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <fstream>
#include <sstream>

#include "event_file.h"

namespace {

namespace fs = std::filesystem;
using mixt::tensorboard::EventFile;

struct TensorBoardOptions {  // the recipe's section
  std::int64_t histograms_every = 0;  // optimizer steps between norm histograms; 0: none
  bool recipe_text = true;
};

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "val_top1_ema" -> "val/top1_ema": metrics.jsonl's names, grouped as TensorBoard shows them.
std::string validation_tag(const std::string& figure, const mixt::Evaluation& eval) {
  return "val/" + figure + (eval.weights.empty() ? "" : "_" + eval.weights);
}

class TensorBoard : public mixt::Callback {
 public:
  TensorBoard(TensorBoardOptions options, const mixt::CallbackContext& context)
      : options_(options), model_(context.model), device_(context.device), rank_(context.rank) {}

  void on_fit_start(const mixt::FitStart& fit) override {
    if (fit.run_directory.empty() || rank_ != 0) return;  // mixt bench, tests, other ranks
    try {
      file_ = std::make_unique<EventFile>(fit.run_directory);
    } catch (const std::exception& e) {
      mixt::warn(std::string("tensorboard: ") + e.what() + "; the run goes on without event files");
      return;
    }
    if (options_.recipe_text && fs::exists(fit.run_directory / "recipe.yaml")) {
      // Indented four spaces: Markdown's code block, so TensorBoard keeps the YAML's layout.
      std::string indented = "    ";
      for (char c : read_text(fit.run_directory / "recipe.yaml")) indented += c == '\n' ? "\n    " : std::string(1, c);
      file_->add_text("recipe", fit.state.global_step, indented);
    }
    flush();
  }

  void on_step_end(const mixt::StepEnd& step) override {
    if (!file_) return;
    const std::int64_t at = step.state.global_step;
    if (options_.histograms_every > 0 && at % options_.histograms_every == 0) write_norms(at);
    if (!step.logged) return;  // mixt reads the loss on these steps anyway: no extra sync
    file_->add_scalar("train/loss", at, step.loss.item<double>());
    file_->add_scalar("train/lr", at, step.learning_rate);
    if (step.grad_norm.defined()) file_->add_scalar("train/grad_norm", at, step.grad_norm.item<double>());
    file_->add_scalar("train/samples_per_s", at, static_cast<double>(step.epoch_samples) / step.epoch_seconds);
    for (const auto& [name, value] : step.precision.metrics()) file_->add_scalar("train/" + name, at, value);
    file_->add_scalar("train/skipped_steps", at, static_cast<double>(step.state.skipped_steps));
  }

  void on_epoch_end(const mixt::EpochEnd& epoch) override {
    if (!file_) return;
    const std::int64_t at = epoch.state.global_step;
    std::vector<const mixt::Evaluation*> evaluations;
    if (epoch.evaluation) evaluations.push_back(epoch.evaluation);
    for (const mixt::Evaluation& other : epoch.other_weights) evaluations.push_back(&other);
    for (const mixt::Evaluation* eval : evaluations) {
      file_->add_scalar(validation_tag("loss", *eval), at, eval->loss);
      for (const mixt::Figure& figure : eval->figures) file_->add_scalar(validation_tag(figure.name, *eval), at, figure.value);
    }
    if (epoch.bad_samples > 0) file_->add_scalar("data/bad_samples", at, static_cast<double>(epoch.bad_samples));
    if (device_.is_cuda()) {
      const auto stats = at::accelerator::getDeviceStats(device_.index());
      file_->add_scalar("memory/peak_allocated_mib", at,
                        static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0));
    }
    flush();
  }

  void on_interrupt(const mixt::TrainState& /*state*/, const fs::path& /*checkpoint*/) override { flush(); }
  void on_fit_end(const mixt::TrainState& /*state*/) override { flush(); }

 private:
  // Per-layer norms of the gradients the optimizer just used and of the weights it made:
  // a layer whose gradients underflow shows as an outlier at zero. One host read.
  void write_norms(std::int64_t at) {
    std::vector<at::Tensor> gradients, weights;
    for (const auto& parameter : model_->named_parameters()) {
      // A weight with no storage (a block's, under trainer.distributed.sharding: parameters)
      // lives on other ranks between steps: it has no norm here.
      if (parameter.value().numel() > 0 && parameter.value().storage().nbytes() == 0) continue;
      weights.push_back(parameter.value().detach().norm().to(at::kDouble));
      if (parameter.value().grad().defined()) gradients.push_back(parameter.value().grad().norm().to(at::kDouble));
    }
    const auto host = [](const std::vector<at::Tensor>& norms) {
      if (norms.empty()) return std::vector<double>{};
      const at::Tensor values = at::stack(norms).cpu();
      return std::vector<double>(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
    };
    file_->add_histogram("norms/gradients", at, host(gradients));
    file_->add_histogram("norms/weights", at, host(weights));
  }

  // A failed write is one warning; the curves go on from the next flush that fits.
  void flush() {
    if (!file_) return;
    file_->flush();
    if (!file_->lost_records() || warned_) return;
    warned_ = true;
    mixt::warn("tensorboard: cannot write " + file_->path().string() +
               " (disk full?); the run goes on, and the curves miss what did not fit");
  }

  TensorBoardOptions options_;
  std::shared_ptr<mixt::Model> model_;
  at::Device device_;
  int rank_;
  std::unique_ptr<EventFile> file_;
  bool warned_ = false;
};

using O = TensorBoardOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::histograms_every, "histograms_every",
             "optimizer steps between histograms of per-layer gradient and weight norms (0: off)", mixt::at_least(0))
        .add(&O::recipe_text, "recipe_text", "the resolved recipe as a text summary");

std::unique_ptr<mixt::Callback> make_tensorboard(const TensorBoardOptions& o, const mixt::CallbackContext& context) {
  return std::make_unique<TensorBoard>(o, context);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_callback("tensorboard",
                         "TensorBoard event files in the run directory (on by default; `tensorboard --logdir runs`)",
                         kOptions, make_tensorboard, mixt::WhenUnlisted::on);
}

}  // namespace

MIXT_PLUGIN("tensorboard", "1.0.0", register_components)
