// mixt — the command line. Each subcommand declares its own flags in its own file
// (commands/command.h); main adds them in the order `mixt --help` lists them, parses with CLI11 and
// runs the one given, every failure reported as one message and the documented exit code
// (process/reporting.h): 0 ok, 1 runtime failure, 2 bad usage/recipe/plugin, 130 interrupted.
#include <CLI/CLI.hpp>

#include "commands/bench_command.h"
#include "commands/check_command.h"
#include "commands/describe_command.h"
#include "commands/diagnose_command.h"
#include "commands/evaluate_command.h"
#include "commands/export_command.h"
#include "commands/generate_command.h"
#include "commands/list_command.h"
#include "commands/lr_find_command.h"
#include "commands/mlflow_sync_command.h"
#include "commands/predict_command.h"
#include "commands/run_command.h"
#include "commands/tokenize_command.h"
#include "commands/version_text.h"
#include "process/reporting.h"

int main(int argc, char** argv) {
  using namespace mixt::cli;
  if (const auto stopped = start_up()) return *stopped;
  CLI::App app{"mixt — mixed-precision training from YAML recipes and plugins", "mixt"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text());

  Commands commands;
  add_run_command(app, commands);
  add_check_command(app, commands);
  add_list_command(app, commands);
  add_describe_command(app, commands);
  add_bench_commands(app, commands);  // bench, and the hidden bench-worker
  add_export_command(app, commands);
  add_predict_command(app, commands);
  add_evaluate_command(app, commands);
  add_generate_command(app, commands);
  add_tokenize_command(app, commands);
  add_lr_find_command(app, commands);
  add_diagnose_command(app, commands);
  add_mlflow_sync_command(app, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report_usage(app, e, argc, argv);
  }
  for (const Command& command : commands) {
    if (*command.app) return run_reporting_errors(command.run);
  }
  return 2;
}
