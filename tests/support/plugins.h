// Loads the in-tree plugins of this build into a registry, for tests that build real
// components.
#pragma once

#include "plugins/plugin_loader.h"
#include "recipe/recipe_loader.h"
#include "plugins/registry.h"
#include "test_support.h"

namespace mixt::testing {

struct BuiltPlugins {
  Registry registry;
  PluginLoader loader{registry};
  BuiltPlugins() { loader.load_directory(plugin_dir(), [](const std::string&) {}); }
  // The task a recipe gets without `task:`, for components a test puts together by hand.
  std::unique_ptr<Task> classification() const {
    return registry.make_task(Config(parse_yaml("{name: classification}", "test"), "task"), TaskContext{});
  }
};

}  // namespace mixt::testing
