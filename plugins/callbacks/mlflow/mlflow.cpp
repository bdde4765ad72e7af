// callbacks/mlflow — the run in an MLflow tracking server (docs/tracking.md).
//
// Rank 0 sends, from a thread of its own (sender.h): the resolved recipe flattened as
// parameters, system tags, every figure of metrics.jsonl at its step, the chosen artifacts
// at the end and the run's status (FINISHED, KILLED on Ctrl-C, FAILED). The training thread
// only wakes that thread; the server, reachable or not, never stops or slows the run. The
// MLflow run's id is kept in the checkpoints and in the run directory (mlflow_run_id), so a
// resume continues the same MLflow run and `mixt mlflow-sync` can send what was left.
#include <mixt/callback.h>
#include <mixt/error.h>
#include <mixt/helpers/safetensors.h>
#include <mixt/helpers/state_dict.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/version.h>
#include <unistd.h>

#include <cstdlib>
#include <set>

#include "mlflow_client.h"
#include "sender.h"
#include "system_tags.h"

namespace {

namespace fs = std::filesystem;
using namespace mixt::mlflow;

struct MlflowOptions {       // the recipe's section
  std::string tracking_uri;  // "": MLFLOW_TRACKING_URI
  std::string experiment;    // "": the recipe's name
  std::string run_name;      // "": <recipe name>-<run directory's timestamp>
  std::int64_t log_every = 0;
  std::vector<std::string> artifacts{"recipe"};
  std::vector<std::string> tags;
  double timeout_s = 10;
  double flush_timeout_s = 30;
};

const std::set<std::string> kArtifactKinds = {"recipe", "best_checkpoint", "safetensors", "tensorboard"};

std::chrono::milliseconds milliseconds_of(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

class Mlflow : public mixt::Callback {
 public:
  Mlflow(MlflowOptions options, const mixt::CallbackContext& context)
      : options_(std::move(options)), model_(context.model), rank_(context.rank), world_size_(context.world_size) {
    if (options_.tracking_uri.empty()) {
      const char* from_environment = std::getenv("MLFLOW_TRACKING_URI");
      options_.tracking_uri = from_environment ? from_environment : "";
    }
  }

  ~Mlflow() override {
    // Neither the end nor an interrupt was seen: the run failed (its error is on its way).
    if (sender_) end("FAILED", /*with_artifacts=*/false, std::min(options_.flush_timeout_s, 10.0));
  }

  void on_fit_start(const mixt::FitStart& fit) override {
    if (fit.run_directory.empty() || rank_ != 0) return;  // mixt bench, tests, other ranks
    run_directory_ = fs::absolute(fit.run_directory);
    if (const std::string bad = check_uri(options_.tracking_uri); !bad.empty()) {
      mixt::warn("mlflow: " + bad + "; the run goes on without tracking (`mixt mlflow-sync " + run_directory_.string() +
                 " --tracking-uri URI` sends it later)");
      return;
    }
    const fs::path recipe = run_directory_ / "recipe.yaml";
    SenderSetup setup;
    setup.run_directory = run_directory_;
    setup.tracking_uri = options_.tracking_uri;
    // The checkpoint's id; else the resumed run's directory's, for a run whose MLflow run was
    // made after its last checkpoint (a short epoch, a slow server).
    if (resumed_run_id_.empty())
      resumed_run_id_ = run_id_beside(param_or(recipe_params_of(recipe), "trainer.resume", ""));
    setup.run_id = resumed_run_id_;
    setup.request_timeout = milliseconds_of(options_.timeout_s);
    try {
      if (fs::exists(recipe)) setup.params = recipe_params(recipe);
    } catch (const std::exception&) {
      mixt::warn("mlflow: cannot read " + recipe.string() + "; the run is tracked without its parameters");
    }
    const std::string name = param_or(setup.params, "name", "mixt");
    setup.experiment = options_.experiment.empty() ? name : options_.experiment;
    setup.run_name = options_.run_name.empty() ? name + "-" + run_directory_.filename().string() : options_.run_name;
    setup.tags = system_tags(run_directory_, param_or(setup.params, "precision.name", ""), world_size_);
    for (const std::string& tag : options_.tags) setup.tags.push_back(split_tag(tag));
    sender_ = std::make_unique<Sender>(std::move(setup));
    log_every_ = options_.log_every;
  }

  void on_step_end(const mixt::StepEnd& step) override {
    if (!sender_) return;
    // metrics.jsonl has its new line by now (mixt's own logger runs first): the sender reads it.
    if (log_every_ > 0 ? step.state.global_step % log_every_ == 0 : step.logged) sender_->wake();
  }

  void on_epoch_end(const mixt::EpochEnd& /*epoch*/) override {
    if (sender_) sender_->wake();
  }

  void on_interrupt(const mixt::TrainState& /*state*/, const fs::path& /*checkpoint*/) override {
    // The process exits with 130 next: a shorter wait, a second Ctrl-C cuts it anyway.
    if (sender_) end("KILLED", /*with_artifacts=*/true, std::min(options_.flush_timeout_s, 10.0));
  }

  void on_fit_end(const mixt::TrainState& /*state*/) override {
    if (sender_) end("FINISHED", /*with_artifacts=*/true, options_.flush_timeout_s);
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    const std::string id = sender_ ? sender_->run_id() : resumed_run_id_;
    archive.write("run_id", c10::IValue(id.empty() ? resumed_run_id_ : id));
  }

  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue id;
    if (archive.try_read("run_id", id) && id.isString()) resumed_run_id_ = id.toStringRef();
  }

 private:
  static Pairs recipe_params_of(const fs::path& recipe) {
    try {
      return fs::exists(recipe) ? recipe_params(recipe) : Pairs{};
    } catch (const std::exception&) {
      return {};
    }
  }

  // mlflow_run_id in the run directory that `resumed` (a run directory or a checkpoint in it) names.
  static std::string run_id_beside(const std::string& resumed) {
    if (resumed.empty()) return "";
    for (fs::path at = fs::absolute(resumed); !at.empty() && at != at.root_path(); at = at.parent_path()) {
      if (fs::exists(at / kRunIdFile)) return read_line(at / kRunIdFile);
      if (fs::exists(at / "metrics.jsonl")) return "";  // the run directory, without an MLflow run
    }
    return "";
  }

  static std::string param_or(const Pairs& params, const std::string& key, const std::string& fallback) {
    for (const auto& [k, v] : params) {
      if (k == key) return v;
    }
    return fallback;
  }

  void end(const std::string& status, bool with_artifacts, double deadline_s) {
    std::unique_ptr<Sender> sender = std::move(sender_);
    const std::string left =
        sender->finish(status, with_artifacts ? artifacts() : std::vector<Artifact>{}, milliseconds_of(deadline_s));
    if (!left.empty()) {
      mixt::warn("mlflow: not sent to " + options_.tracking_uri + ": " + left + "; `mixt mlflow-sync " +
                 run_directory_.string() + "` sends them from metrics.jsonl once the server is back");
    }
  }

  std::vector<Artifact> artifacts() {
    std::vector<Artifact> files;
    const std::set<std::string> wanted(options_.artifacts.begin(), options_.artifacts.end());
    if (wanted.count("recipe") && fs::exists(run_directory_ / "recipe.yaml")) {
      files.push_back({"recipe.yaml", run_directory_ / "recipe.yaml"});
    }
    if (wanted.count("best_checkpoint")) {
      std::error_code ec;
      const fs::path best = fs::canonical(run_directory_ / "checkpoints" / "best", ec);
      if (!ec) {
        files.push_back({"checkpoints/" + best.filename().string(), best});
      } else {
        mixt::warn("mlflow: no checkpoints/best to upload (the best_checkpoint callback keeps it)");
      }
    }
    if (wanted.count("safetensors")) {
      const fs::path file = run_directory_ / "model.safetensors";
      try {  // the weights the run ended with, as `mixt export -o model.safetensors` names them
        mixt::save_safetensors(file, mixt::state_dict(*model_), {{"format", "pt"}, {"source", "mixt mlflow"}});
        files.push_back({"model.safetensors", file});
      } catch (const std::exception&) {
        mixt::warn("mlflow: cannot write " + file.string() + "; it is not uploaded");
      }
    }
    if (wanted.count("tensorboard")) {
      for (const auto& entry : fs::directory_iterator(run_directory_)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("events.out.tfevents", 0) == 0) files.push_back({"tensorboard/" + name, entry.path()});
      }
    }
    return files;
  }

  MlflowOptions options_;
  std::shared_ptr<mixt::Model> model_;
  int rank_, world_size_;
  std::int64_t log_every_ = 0;
  fs::path run_directory_;
  std::string resumed_run_id_;
  std::unique_ptr<Sender> sender_;
};

using O = MlflowOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::tracking_uri, "tracking_uri",
             "the tracking server, http(s)://host:port (empty: $MLFLOW_TRACKING_URI); credentials only from "
             "$MLFLOW_TRACKING_TOKEN or $MLFLOW_TRACKING_USERNAME/$MLFLOW_TRACKING_PASSWORD")
        .add(&O::experiment, "experiment", "the MLflow experiment, made when missing (empty: the recipe's name)")
        .add(&O::run_name, "run_name", "the MLflow run's name (empty: <recipe name>-<run directory's timestamp>)")
        .add(&O::log_every, "log_every",
             "optimizer steps between sends of what metrics.jsonl gained (0: every trainer.log_every step)",
             mixt::at_least(0))
        .add(&O::artifacts, "artifacts",
             "uploaded at the end: any of recipe, best_checkpoint, safetensors, tensorboard",
             [](const std::vector<std::string>& kinds) -> std::optional<std::string> {
               for (const std::string& kind : kinds) {
                 if (!kArtifactKinds.count(kind)) {
                   return "unknown artifact '" + kind + "': one of recipe, best_checkpoint, safetensors, tensorboard";
                 }
               }
               return std::nullopt;
             })
        .add(&O::tags, "tags", "the run's own tags, each \"key=value\"",
             [](const std::vector<std::string>& tags) -> std::optional<std::string> {
               for (const std::string& tag : tags) {
                 if (split_tag(tag).first.empty()) return "tag '" + tag + "' is not key=value";
               }
               return std::nullopt;
             })
        .add(&O::timeout_s, "timeout_s", "seconds one request to the server may take", mixt::above(0))
        .add(&O::flush_timeout_s, "flush_timeout_s",
             "seconds the end of the run waits for the server to take what is left (then it says what was not "
             "sent)",
             mixt::at_least(0));

std::unique_ptr<mixt::Callback> make_mlflow(const MlflowOptions& o, const mixt::CallbackContext& context) {
  return std::make_unique<Mlflow>(o, context);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_callback("mlflow", "the run in an MLflow tracking server: parameters, metrics, artifacts, status",
                         kOptions, make_mlflow);
}

}  // namespace

MIXT_PLUGIN("mlflow", "1.0.0", register_components)
