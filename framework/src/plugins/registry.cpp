#include "plugins/registry.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

#include "common/closest_match.h"
#include "sdk/plugin_translations.h"

namespace mixt {

namespace {
const std::vector<std::pair<ComponentKind, const char*>> kKindNames = {
    {ComponentKind::model, "model"},         {ComponentKind::optimizer, "optimizer"},
    {ComponentKind::scheduler, "scheduler"}, {ComponentKind::precision, "precision"},
    {ComponentKind::dataset, "dataset"},     {ComponentKind::callback, "callback"},
    {ComponentKind::task, "task"},           {ComponentKind::adapter, "adapter"},
};

// Runs a factory; anything it throws that is not already a mixt error is reported with
// the component and the plugin it came from (and never with a C++ backtrace).
template <typename Make>
auto guarded(const ComponentEntry& entry, Make make) -> decltype(make()) {
  const std::string who = std::string(kind_name(entry.kind)) + " '" + entry.name + "' (plugin '" +
                          entry.origin.name + "')";
  try {
    auto component = make();
    if (!component) throw plugin_error(who + " returned nothing", entry.origin.file);
    return component;
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw plugin_error(who + " failed to build: " + e.what_without_backtrace(), entry.origin.file);
  } catch (const std::exception& e) {
    throw plugin_error(who + " failed to build: " + e.what(), entry.origin.file);
  } catch (...) {
    throw plugin_error(who + " failed to build: unknown exception", entry.origin.file);
  }
}
}  // namespace

const char* kind_name(ComponentKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  return "component";
}

const std::vector<ComponentKind>& all_kinds() {
  static const std::vector<ComponentKind> kinds = [] {
    std::vector<ComponentKind> out;
    for (const auto& [kind, name] : kKindNames) out.push_back(kind);
    return out;
  }();
  return kinds;
}

std::optional<ComponentKind> find_kind(const std::string& name) {
  for (const auto& [kind, kind_text] : kKindNames) {
    if (name == kind_text || name == std::string(kind_text) + "s") return kind;  // `mixt list models` too
  }
  return std::nullopt;
}

ComponentKind parse_kind(const std::string& name) {
  if (const auto kind = find_kind(name)) return *kind;
  std::vector<std::string> names;
  for (const auto& [kind, kind_text] : kKindNames) names.emplace_back(kind_text);
  throw usage_error("unknown component kind '" + name + "'", suggestion_hint(name, names, "kinds"));
}

void Registry::begin_plugin(PluginOrigin origin) {
  current_ = std::move(origin);
  added_by_current_.clear();
}

std::size_t Registry::end_plugin() {
  current_.reset();
  return std::exchange(added_by_current_, {}).size() + std::exchange(translations_by_current_, 0);
}

void Registry::discard_plugin() {
  for (const auto& key : added_by_current_) entries_.erase(key);
  if (current_) remove_plugin_translations(current_->file);
  end_plugin();
}

ComponentEntry& Registry::add(ComponentKind kind, const std::string& name, ComponentInfo info) {
  PluginOrigin origin = current_.value_or(PluginOrigin{"<built in>", "mixt", version()});
  auto key = std::make_pair(kind, name);
  if (auto it = entries_.find(key); it != entries_.end()) {
    throw plugin_error(std::string(kind_name(kind)) + " '" + name + "' is registered twice: by " +
                           it->second.origin.file + " and by " + origin.file,
                       origin.file, "remove one of the two plugins, or rename one component");
  }
  if (name.empty()) throw plugin_error("a component with an empty name", origin.file);
  ComponentEntry& entry = entries_[key];
  if (current_) added_by_current_.push_back(key);
  entry.kind = kind;
  entry.name = name;
  entry.info = std::move(info);
  entry.origin = std::move(origin);
  return entry;
}

void Registry::register_model(const std::string& name, ComponentInfo info, ModelFactory factory) {
  add(ComponentKind::model, name, std::move(info)).model = std::move(factory);
}
void Registry::register_optimizer(const std::string& name, ComponentInfo info, OptimizerFactory factory) {
  add(ComponentKind::optimizer, name, std::move(info)).optimizer = std::move(factory);
}
void Registry::register_scheduler(const std::string& name, ComponentInfo info, SchedulerFactory factory) {
  add(ComponentKind::scheduler, name, std::move(info)).scheduler = std::move(factory);
}
void Registry::register_precision(const std::string& name, ComponentInfo info, PrecisionFactory factory) {
  add(ComponentKind::precision, name, std::move(info)).precision = std::move(factory);
}
void Registry::register_dataset(const std::string& name, ComponentInfo info, DatasetFactory factory) {
  add(ComponentKind::dataset, name, std::move(info)).dataset = std::move(factory);
}
void Registry::register_callback(const std::string& name, ComponentInfo info, CallbackFactory factory) {
  add(ComponentKind::callback, name, std::move(info)).callback = std::move(factory);
}
void Registry::register_task(const std::string& name, ComponentInfo info, TaskFactory factory) {
  add(ComponentKind::task, name, std::move(info)).task = std::move(factory);
}

void Registry::register_adapter(const std::string& name, ComponentInfo info, AdapterFactory factory) {
  add(ComponentKind::adapter, name, std::move(info)).adapter = std::move(factory);
}

// The model's entry, for the calls that may follow only its plugin's add_model.
ComponentEntry& Registry::own_model(const std::string& model, const std::string& call) {
  const auto key = std::make_pair(ComponentKind::model, model);
  const bool own = std::find(added_by_current_.begin(), added_by_current_.end(), key) != added_by_current_.end();
  auto it = entries_.find(key);
  if (it == entries_.end() || (current_ && !own)) {
    const std::string file = current_ ? current_->file : "<built in>";
    throw plugin_error(call + " for model '" + model + "', which this plugin did not add", file,
                       "call it after add_model(\"" + model + "\", ...)");
  }
  return it->second;
}

void Registry::register_transformers_config(const std::string& model, TransformersConfig config) {
  own_model(model, "read_transformers_config").transformers = std::move(config);
}

void Registry::register_transformers_defaults(const std::string& model, TransformersDefaults defaults) {
  ComponentEntry& entry = own_model(model, "read_transformers_defaults");
  if (!entry.transformers) {
    throw plugin_error("read_transformers_defaults for model '" + model + "' before read_transformers_config",
                       current_ ? current_->file : "<built in>", "call read_transformers_config first");
  }
  entry.transformers_defaults = std::move(defaults);
}

void Registry::register_onnx_translation(const std::string& op, std::string onnx, OnnxTranslator translate) {
  add_plugin_translation({op, std::move(onnx), current_ ? current_->file : "<built in>", std::move(translate)});
  ++translations_by_current_;
}

const ComponentEntry* Registry::find(ComponentKind kind, const std::string& name) const {
  auto it = entries_.find({kind, name});
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::names(ComponentKind kind) const {
  std::vector<std::string> out;
  for (const auto& [key, entry] : entries_) {
    if (key.first == kind) out.push_back(key.second);
  }
  return out;
}

const ComponentEntry& Registry::find(ComponentKind kind, const Config& section) const {
  const std::string kind_text = kind_name(kind);
  if (section.empty() && !section.has("name")) {
    const std::string article = kind_text == "optimizer" ? "an " : "a ";
    throw recipe_error("missing section: this recipe needs " + article + kind_text, section.location(), section.path(),
                       "add `" + section.path() + ": {name: <" + kind_text + ">}`");
  }
  const std::string name = section.string("name");
  if (const ComponentEntry* entry = find(kind, name)) return *entry;
  section.fail("name", "unknown " + kind_text + " '" + name + "'",
               suggestion_hint(name, names(kind), "known " + kind_text + "s") +
                   "; one from a plugin of your own needs its .so in the recipe's plugins: list (or its "
                   "directory on MIXT_PLUGIN_PATH)");
}

std::vector<const ComponentEntry*> Registry::list(std::optional<ComponentKind> kind,
                                                  const std::string& glob) const {
  std::vector<const ComponentEntry*> out;
  for (const auto& [key, entry] : entries_) {
    if ((!kind || key.first == *kind) && glob_match(glob, key.second)) out.push_back(&entry);
  }
  return out;
}

std::shared_ptr<Model> Registry::make_model(const Config& section, const ModelContext& context) const {
  const auto& entry = find(ComponentKind::model, section);
  return guarded(entry, [&] { return entry.model(section, context); });
}
std::unique_ptr<Optimizer> Registry::make_optimizer(const Config& section,
                                                    const OptimizerContext& context) const {
  const auto& entry = find(ComponentKind::optimizer, section);
  return guarded(entry, [&] { return entry.optimizer(section, context); });
}
std::unique_ptr<Scheduler> Registry::make_scheduler(const Config& section,
                                                    const SchedulerContext& context) const {
  const auto& entry = find(ComponentKind::scheduler, section);
  return guarded(entry, [&] { return entry.scheduler(section, context); });
}
std::unique_ptr<PrecisionPolicy> Registry::make_precision(const Config& section,
                                                          const PrecisionContext& context) const {
  const auto& entry = find(ComponentKind::precision, section);
  return guarded(entry, [&] { return entry.precision(section, context); });
}
std::unique_ptr<Dataset> Registry::make_dataset(const Config& section, const DatasetContext& context) const {
  const auto& entry = find(ComponentKind::dataset, section);
  return guarded(entry, [&] { return entry.dataset(section, context); });
}
std::unique_ptr<Callback> Registry::make_callback(const Config& section, const CallbackContext& context) const {
  const auto& entry = find(ComponentKind::callback, section);
  return guarded(entry, [&] { return entry.callback(section, context); });
}
std::unique_ptr<Task> Registry::make_task(const Config& section, const TaskContext& context) const {
  const auto& entry = find(ComponentKind::task, section);
  return guarded(entry, [&] { return entry.task(section, context); });
}

std::unique_ptr<Adapter> Registry::make_adapter(const Config& section, const AdapterContext& context) const {
  const auto& entry = find(ComponentKind::adapter, section);
  return guarded(entry, [&] { return entry.adapter(section, context); });
}

bool glob_match(std::string_view pattern, std::string_view text) {
  if (pattern.empty()) return text.empty();
  if (pattern[0] == '*') {
    for (std::size_t skip = 0; skip <= text.size(); ++skip) {
      if (glob_match(pattern.substr(1), text.substr(skip))) return true;
    }
    return false;
  }
  if (text.empty()) return false;
  if (pattern[0] != '?' && pattern[0] != text[0]) return false;
  return glob_match(pattern.substr(1), text.substr(1));
}

}  // namespace mixt
