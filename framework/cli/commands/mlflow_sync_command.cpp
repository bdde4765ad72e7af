#include "commands/mlflow_sync_command.h"

#include <mixt/error.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "common/shared_library.h"

namespace mixt::cli {

namespace {

struct MlflowSyncOptions {
  std::string run_directory;
  std::string tracking_uri;  // "": the recipe's mlflow entry, then $MLFLOW_TRACKING_URI
  std::string experiment;    // for a run that has no MLflow run yet
};

// The module's entry (plugins/callbacks/mlflow/sync_entry.cpp): 0, 1 or 2, and why in *error.
using SyncFunction = int (*)(const char*, const char*, const char*, std::string*);

int mlflow_sync(const MlflowSyncOptions& options) {
  std::error_code ec;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path module = program.parent_path().parent_path() / "lib" / "mixt" / "libmixt_mlflow_sync.so";
  SyncFunction sync = nullptr;
  try {
    sync = reinterpret_cast<SyncFunction>(resident_symbol(module, "mixt_mlflow_sync"));
  } catch (const SharedLibraryError& e) {
    throw runtime_error(std::string("this mixt cannot talk to MLflow (") + e.what() + ")",
                        "build mixt where libcurl is installed (scripts/setup installs libcurl4-openssl-dev)");
  }
  std::string error;
  const int code =
      sync(options.run_directory.c_str(), options.tracking_uri.c_str(), options.experiment.c_str(), &error);
  if (code == 2) throw usage_error("mlflow-sync: " + error);
  if (code != 0)
    throw runtime_error("mlflow-sync: " + error,
                        "nothing already sent is lost; run it again once the "
                        "server answers");
  return 0;
}

}  // namespace

void add_mlflow_sync_command(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<MlflowSyncOptions>();
  CLI::App* command =
      app.add_subcommand("mlflow-sync", "send a run directory's parameters, metrics and artifacts to MLflow");
  command->add_option("run", o->run_directory, "the run directory (runs/<name>/<timestamp>)")->required();
  command->add_option("--tracking-uri", o->tracking_uri,
                      "the tracking server (default: the recipe's mlflow.tracking_uri, then $MLFLOW_TRACKING_URI)");
  command->add_option("--experiment", o->experiment,
                      "the experiment of a new MLflow run (default: the recipe's, then the recipe's name)");
  commands.push_back({command, [o] { return mlflow_sync(*o); }});
}

}  // namespace mixt::cli
