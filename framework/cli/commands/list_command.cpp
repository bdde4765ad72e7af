#include "commands/list_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "common/closest_match.h"
#include "experiment/session.h"

namespace mixt::cli {

int list(const std::string& kind, const std::string& glob, const std::string& recipe) {
  Session session;
  session.load_plugins_for(recipe);
  const Registry& registry = session.registry();
  std::optional<ComponentKind> filter;
  std::string pattern = glob.empty() ? "*" : glob;
  // `mixt list 'resnet*'`: one argument that is no kind is a name pattern over every kind;
  // when nothing matches it either, it was a misspelt kind.
  const std::vector<std::string> kinds = [] {
    std::vector<std::string> names;
    for (ComponentKind k : all_kinds()) names.emplace_back(kind_name(k));
    return names;
  }();
  const bool kind_is_pattern = !kind.empty() && glob.empty() && !find_kind(kind);
  if (kind_is_pattern) {
    pattern = kind;
  } else if (!kind.empty()) {
    filter = parse_kind(kind);
  }
  const auto entries = registry.list(filter, pattern);
  if (kind_is_pattern && entries.empty()) {
    throw usage_error("no component kind or name matches '" + kind + "'", suggestion_hint(kind, kinds, "kinds"));
  }
  for (ComponentKind k : all_kinds()) {
    bool header = false;
    for (const ComponentEntry* entry : entries) {
      if (entry->kind != k) continue;
      if (!header) std::printf("%s:\n", kind_name(k));
      header = true;
      std::printf("  %-18s %s\n  %-18s   (%s %s, %s)\n", entry->name.c_str(), entry->info.summary.c_str(), "",
                  entry->origin.name.c_str(), entry->origin.version.c_str(), entry->origin.file.c_str());
    }
  }
  if (entries.empty()) std::printf("no components match\n");
  return 0;
}

void add_list_command(CLI::App& app, Commands& commands) {
  struct Arguments {
    std::string kind, glob, recipe;
  };
  auto args = std::make_shared<Arguments>();
  CLI::App* list_app = app.add_subcommand("list", "list registered components");
  list_app->add_option(
      "kind", args->kind,
      "model, optimizer, scheduler, precision, dataset, callback, task or adapter (alone: or a name wildcard)");
  list_app->add_option("glob", args->glob, "wildcard on the name, e.g. 'resnet*'");
  list_app->add_option("--recipe", args->recipe, "also load this recipe's plugins: list, as mixt run does");
  commands.push_back({list_app, [args] { return list(args->kind, args->glob, args->recipe); }});
}

}  // namespace mixt::cli
