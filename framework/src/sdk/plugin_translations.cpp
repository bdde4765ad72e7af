#include "sdk/plugin_translations.h"

#include <map>
#include <mutex>

#include "mixt/error.h"

namespace mixt {

namespace {
std::mutex table_mutex;
// Entries are never moved once added (std::map), so a pointer handed out stays valid
// until its plugin is removed.
std::map<std::string, PluginTranslation, std::less<>>& table() {
  static std::map<std::string, PluginTranslation, std::less<>> translations;
  return translations;
}
}  // namespace

void add_plugin_translation(PluginTranslation translation) {
  if (translation.op.empty() || !translation.translate) {
    throw plugin_error("add_onnx_translation needs an op name and a translation", translation.plugin);
  }
  std::lock_guard<std::mutex> lock(table_mutex);
  const auto found = table().find(translation.op);
  if (found != table().end() && found->second.plugin != translation.plugin) {
    throw plugin_error("the ONNX translation of '" + translation.op + "' is registered twice: by " +
                           found->second.plugin + " and by " + translation.plugin,
                       translation.plugin, "load only one of the two plugins");
  }
  const std::string op = translation.op;
  table().insert_or_assign(op, std::move(translation));
}

void remove_plugin_translations(const std::string& plugin) {
  std::lock_guard<std::mutex> lock(table_mutex);
  for (auto it = table().begin(); it != table().end();) {
    it = it->second.plugin == plugin ? table().erase(it) : std::next(it);
  }
}

const PluginTranslation* find_plugin_translation(std::string_view op) {
  std::lock_guard<std::mutex> lock(table_mutex);
  const auto found = table().find(op);
  return found == table().end() ? nullptr : &found->second;
}

}  // namespace mixt
