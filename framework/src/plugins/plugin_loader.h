// Loads plugin libraries (common/shared_library.h), checks their descriptors, and lets them
// register.
//
// Libraries are loaded once and never unloaded: components a plugin created point into
// its code for as long as the process lives.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "plugins/registry.h"

namespace mixt {

struct LoadedPlugin {
  std::string file;
  std::string name;
  std::string version;
};

class PluginLoader {
 public:
  explicit PluginLoader(Registry& registry) : registry_(registry) {}

  // Loads one plugin library; any problem is a plugin error naming the file.
  // Loading the same file twice is a no-op.
  void load(const std::filesystem::path& file);

  // Loads every lib*.so in a directory, in name order. A file that is not a usable plugin,
  // or that registers a name already taken (the warning names both files), is skipped
  // with a warning (passed to `warn`); `load` of one file is strict.
  void load_directory(const std::filesystem::path& directory,
                      const std::function<void(const std::string&)>& warn);

  const std::vector<LoadedPlugin>& loaded() const { return loaded_; }

 private:
  Registry& registry_;
  std::vector<LoadedPlugin> loaded_;
};

// Where plugins are found, in order: the plugin directory of this build/install
// (next to libmixt), then the entries of MIXT_PLUGIN_PATH (directories or files).
std::vector<std::filesystem::path> default_plugin_locations();

// Loads the default locations (warning about bad files) and then `required` files
// (recipe `plugins:`), for which any failure is fatal.
void load_plugins(PluginLoader& loader, const std::vector<std::filesystem::path>& required,
                  const std::function<void(const std::string&)>& warn);

}  // namespace mixt
