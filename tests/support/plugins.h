// Loads the in-tree plugins of this build into a registry, for tests that build real
// components.
#pragma once

#include "plugins/plugin_loader.h"
#include "plugins/registry.h"
#include "test_support.h"

namespace mixt::testing {

struct BuiltPlugins {
  Registry registry;
  PluginLoader loader{registry};
  BuiltPlugins() { loader.load_directory(plugin_dir(), [](const std::string&) {}); }
};

}  // namespace mixt::testing
