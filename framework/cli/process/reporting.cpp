#include "process/reporting.h"

#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/closest_match.h"
#include "common/first_line.h"
#include "common/host_allocator.h"
#include "mixt/error.h"
#include "process/startup_signals.h"
#include "train/out_of_memory.h"

namespace mixt::cli {

namespace {

int report(const mixt::Error& error) {
  std::string text = "mixt: ";
  if (error.kind() != mixt::ErrorKind::interrupted) text += "error: ";
  text += error.what();
  if (!error.hint().empty()) text += "\n  hint: " + error.hint();
  std::fprintf(stderr, "%s\n", text.c_str());
  return error.exit_code();
}

}  // namespace

std::optional<int> start_up() {
  if (end_of_startup()) {
    std::fprintf(stderr, "mixt: interrupted while starting; nothing was done\n");
    return 130;
  }
  const char* allocator_setting = std::getenv("MIXT_HOST_ALLOCATOR");
  const auto setting = parse_host_allocator_setting(allocator_setting ? allocator_setting : "");
  if (!setting) {
    std::fprintf(stderr, "mixt: error: MIXT_HOST_ALLOCATOR=%s: unknown setting\n  hint: %s\n", allocator_setting,
                 suggestion_hint(allocator_setting, host_allocator_setting_names(), "settings").c_str());
    return 2;
  }
  configure_host_allocator(*setting);
  return std::nullopt;
}

int report_usage(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App* c) { return !c->get_group().empty(); })) {
    commands.push_back(command->get_name());
  }
  const auto parsed = app.get_subcommands();
  const std::string command = parsed.empty() ? "" : parsed.front()->get_name();
  std::string message = error.what(), hint;
  // "Could not convert: --batch = abc": mixt's numeric options take whole numbers but one.
  const std::string not_converted = "Could not convert: ";
  if (dynamic_cast<const CLI::ConversionError*>(&error) && message.rfind(not_converted, 0) == 0) {
    const std::size_t equals = message.find(" = ");
    if (equals != std::string::npos) {
      const std::string option = message.substr(not_converted.size(), equals - not_converted.size());
      message = option + ": expected " + (option == "--max-skipped" ? "a number" : "a whole number") + ", got '" +
                message.substr(equals + 3) + "'";
    }
  }
  if (argc == 1) {  // `mixt` alone: what it can do is the answer
    std::fprintf(stderr, "%s", app.help().c_str());
    return 2;
  }
  if (parsed.empty() && argv[1][0] != '-') {
    message = "unknown command '" + std::string(argv[1]) + "'";
    hint = suggestion_hint(argv[1], commands, "commands");
  } else if (dynamic_cast<const CLI::ExtrasError*>(&error) &&
             (command == "run" || command == "check" || command == "diagnose" || command == "evaluate" ||
              command == "predict" || command == "lr-find")) {
    hint = "recipe settings are key=value overrides, without dashes: trainer.epochs=2 optimizer.lr=0.1";
  } else {
    hint = command.empty() ? "mixt --help lists the commands" : "mixt " + command + " --help shows its usage";
  }
  std::fprintf(stderr, "mixt: error: %s\n  hint: %s\n", message.c_str(), hint.c_str());
  return 2;
}

int run_reporting_errors(const std::function<int()>& command) {
  try {
    return command();
  } catch (const mixt::Error& e) {
    return report(e);
  } catch (const c10::OutOfMemoryError& e) {
    return report(mixt::runtime_error("out of memory: " + mixt::first_line(e.what_without_backtrace()),
                                      mixt::kOutOfMemoryHint));
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "mixt: error: LibTorch: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixt: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace mixt::cli
