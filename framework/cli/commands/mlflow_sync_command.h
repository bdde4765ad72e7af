// `mixt mlflow-sync RUN_DIR`: sends a run directory to its MLflow run afterwards (what the
// mlflow callback could not send, or a run trained without it), from its recipe.yaml,
// metrics.jsonl and mlflow_run_id. The work is in lib/mixt/libmixt_mlflow_sync.so, beside the
// mlflow callback's plugin, so that the program needs no HTTP library (docs/tracking.md).
#pragma once

#include "commands/command.h"

namespace mixt::cli {

void add_mlflow_sync_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
