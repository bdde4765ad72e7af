// `mixt mlflow-sync RUN_DIR`'s work, in a module the mixt program loads when asked
// (lib/mixt/libmixt_mlflow_sync.so), so the program itself needs no libcurl: it sends a run
// directory's recipe, metrics.jsonl and final status to its MLflow run (mlflow_run_id, or a
// new one), each metric only at the steps the server does not have yet, so running it twice
// adds nothing.
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "mlflow_client.h"
#include "mlflow_run.h"
#include "run_files.h"
#include "system_tags.h"

namespace {

namespace fs = std::filesystem;
using namespace mixt::mlflow;

int fail(const std::string& message, std::string* error) {
  *error = message;
  return 1;
}

std::string value_of(const Pairs& params, const std::string& key) {
  for (const auto& [k, v] : params) {
    if (k == key) return v;
  }
  return "";
}

}  // namespace

// Returns the exit code (0 all sent, 1 a failure described in *error, 2 bad usage) and
// prints what it sent on stdout.
extern "C" __attribute__((visibility("default"))) int mixt_mlflow_sync(const char* run_dir, const char* uri_option,
                                                                       const char* experiment_option,
                                                                       std::string* error) {
  const fs::path run = run_dir;
  if (!fs::is_regular_file(run / "metrics.jsonl")) {
    *error = run.string() + " is not a run directory (no metrics.jsonl)";
    return 2;
  }
  RecipeTracking tracking;
  Pairs params;
  if (fs::exists(run / "recipe.yaml")) {
    try {
      tracking = recipe_tracking(run / "recipe.yaml");
      params = recipe_params(run / "recipe.yaml");
    } catch (const std::exception&) {
      return fail("cannot read " + (run / "recipe.yaml").string() + " as YAML", error);
    }
  }
  std::string uri = *uri_option ? uri_option : tracking.tracking_uri;
  if (uri.empty() && std::getenv("MLFLOW_TRACKING_URI")) uri = std::getenv("MLFLOW_TRACKING_URI");
  if (const std::string bad = check_uri(uri); !bad.empty()) {
    *error = bad + " (or --tracking-uri)";
    return 2;
  }
  Client client(uri, std::chrono::seconds(30));
  Run mlflow_run(client);
  const std::string name = value_of(params, "name").empty() ? "mixt" : value_of(params, "name");
  const std::string known = read_line(run / kRunIdFile);
  bool opened = false;
  if (!known.empty()) {
    const Reply reply = mlflow_run.open(known);
    if (!reply.ok() && reply.status != 404)
      return fail("cannot open MLflow run " + known + " at " + uri + ": " + reply.error, error);
    opened = reply.ok();
    if (!opened) std::printf("the MLflow run %s is not on %s: a new one is made\n", known.c_str(), uri.c_str());
  }
  if (!opened) {
    const std::string experiment =
        *experiment_option ? experiment_option : (tracking.experiment.empty() ? name : tracking.experiment);
    Pairs tags = system_tags(run, value_of(params, "precision.name"), 1);
    for (const std::string& tag : tracking.tags) tags.push_back(split_tag(tag));
    const std::string run_name = tracking.run_name.empty() ? name + "-" + run.filename().string() : tracking.run_name;
    const Reply created = mlflow_run.create(experiment, run_name, tags);
    if (!created.ok()) return fail("cannot create an MLflow run at " + uri + ": " + created.error, error);
    write_line(run / kRunIdFile, mlflow_run.id());
    std::printf("MLflow run %s created in experiment %s\n", mlflow_run.id().c_str(), experiment.c_str());
  }
  if (const Reply logged = mlflow_run.log_params(params); !logged.ok()) {
    return fail("cannot log the parameters: " + logged.error, error);
  }

  std::uintmax_t offset = 0;
  const std::vector<MetricPoint> all = read_metrics(run / "metrics.jsonl", offset, SIZE_MAX);
  std::map<std::string, std::set<std::int64_t>> on_server;
  for (const MetricPoint& point : all) {
    if (on_server.count(point.key)) continue;
    std::vector<std::int64_t> steps;
    if (const Reply read = mlflow_run.history(point.key, steps); !read.ok()) {
      return fail("cannot read the history of " + point.key + ": " + read.error, error);
    }
    on_server[point.key] = std::set<std::int64_t>(steps.begin(), steps.end());
  }
  std::vector<MetricPoint> missing;
  for (const MetricPoint& point : all) {
    if (!on_server[point.key].count(point.step)) missing.push_back(point);
  }
  if (const Reply logged = mlflow_run.log_metrics(missing, now_ms()); !logged.ok()) {
    return fail("cannot log metrics: " + logged.error, error);
  }
  std::printf("%zu metric values sent (%zu already there)\n", missing.size(), all.size() - missing.size());

  // The artifacts the recipe asked for that exist on disk (a PUT replaces: sending twice is harmless).
  const std::set<std::string> wanted(tracking.artifacts.begin(), tracking.artifacts.end());
  std::vector<std::pair<std::string, fs::path>> files;
  if (wanted.count("recipe") && fs::exists(run / "recipe.yaml")) files.emplace_back("recipe.yaml", run / "recipe.yaml");
  std::error_code ec;
  if (const fs::path best = fs::canonical(run / "checkpoints" / "best", ec); wanted.count("best_checkpoint") && !ec) {
    files.emplace_back("checkpoints/" + best.filename().string(), best);
  }
  if (wanted.count("safetensors") && fs::exists(run / "model.safetensors")) {
    files.emplace_back("model.safetensors", run / "model.safetensors");
  }
  if (wanted.count("tensorboard")) {
    for (const auto& entry : fs::directory_iterator(run)) {
      const std::string file = entry.path().filename().string();
      if (file.rfind("events.out.tfevents", 0) == 0) files.emplace_back("tensorboard/" + file, entry.path());
    }
  }
  for (const auto& [relative, file] : files) {
    if (const Reply uploaded = mlflow_run.upload(relative, file); !uploaded.ok()) {
      return fail("cannot upload " + relative + ": " + uploaded.error, error);
    }
    std::printf("artifact %s uploaded\n", relative.c_str());
  }
  // The status the run ended with (mlflow_status); none yet: the run is still going or died unsaid.
  if (const std::string status = read_line(run / kStatusFile); !status.empty() && mlflow_run.status() != status) {
    if (const Reply updated = mlflow_run.set_status(status); !updated.ok()) {
      return fail("cannot set the run's status: " + updated.error, error);
    }
    std::printf("status %s\n", status.c_str());
  }
  std::printf("MLflow run %s at %s is up to date with %s\n", mlflow_run.id().c_str(), uri.c_str(),
              run.string().c_str());
  return 0;
}
