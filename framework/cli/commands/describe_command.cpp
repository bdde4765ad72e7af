#include "commands/describe_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/closest_match.h"
#include "experiment/session.h"
#include "plugins/option_table.h"

namespace mixt::cli {

namespace {
void print_options(const std::vector<OptionDoc>& options, bool markdown) {
  if (markdown) {  // the docs' tables are these rows (a test holds docs/recipes.md to them)
    std::printf("| option | default | meaning |\n|---|---|---|\n%s", option_table_rows(options).c_str());
    return;
  }
  if (options.empty()) {
    std::printf("options: none\n");
    return;
  }
  int width = 22;
  for (const OptionDoc& option : options) width = std::max(width, static_cast<int>(option.name.size()));
  std::printf("options:\n");
  for (const OptionDoc& option : options) {
    const std::string value = option.default_value.empty() ? "(required)" : option.default_value;
    std::printf("  %-*s %-12s %s\n", width, option.name.c_str(), value.c_str(), option.help.c_str());
  }
}
}  // namespace

int describe(const std::string& kind_text, const std::string& name, const std::string& recipe, bool markdown) {
  // The trainer is no plugin, but its options are looked up the same way.
  if (kind_text == "trainer") {
    if (!markdown) std::printf("trainer — the training loop (the recipe's trainer: section)\n\n");
    print_options(trainer_option_docs(), markdown);
    return 0;
  }
  const ComponentKind kind = parse_kind(kind_text);  // `mixt describe bogus`: the kind is what is wrong
  if (name.empty()) {
    throw usage_error("mixt describe " + kind_text + " needs a name", "mixt list " + kind_text + " shows them");
  }
  Session session;
  session.load_plugins_for(recipe);
  const Registry& registry = session.registry();
  const ComponentEntry* entry = registry.find(kind, name);
  if (!entry) {
    throw usage_error("unknown " + kind_text + " '" + name + "'",
                      suggestion_hint(name, registry.names(kind), "known " + kind_text + "s") +
                          "; mixt list and describe see a plugin of your own when its .so (or its directory) is "
                          "on MIXT_PLUGIN_PATH, or with --recipe FILE naming it in plugins:");
  }
  if (!markdown) {
    std::printf("%s %s — %s\n", kind_text.c_str(), entry->name.c_str(), entry->info.summary.c_str());
    std::printf("plugin: %s %s (%s)\n\n", entry->origin.name.c_str(), entry->origin.version.c_str(),
                entry->origin.file.c_str());
  }
  std::vector<OptionDoc> options = entry->info.options;
  for (const OptionDoc& framework : framework_option_docs(kind)) {  // unless the plugin lists them itself
    const auto listed = [&](const OptionDoc& option) { return option.name == framework.name; };
    if (std::none_of(options.begin(), options.end(), listed)) options.push_back(framework);
  }
  print_options(options, markdown);
  return 0;
}

void add_describe_command(CLI::App& app, Commands& commands) {
  struct Arguments {
    std::string kind, name, recipe;
    bool markdown = false;
  };
  auto args = std::make_shared<Arguments>();
  CLI::App* describe_app = app.add_subcommand("describe", "show a component's (or the trainer's) options and defaults");
  describe_app->add_option("kind", args->kind, "component kind, or trainer")->required();
  describe_app->add_option("name", args->name, "component name (none for trainer)");
  describe_app->add_option("--recipe", args->recipe, "also load this recipe's plugins: list, as mixt run does");
  describe_app->add_flag("--markdown", args->markdown, "the options as a Markdown table, as the docs show them");
  commands.push_back({describe_app, [args] { return describe(args->kind, args->name, args->recipe, args->markdown); }});
}

}  // namespace mixt::cli
