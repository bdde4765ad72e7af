// The registry: every component every loaded plugin registered, by kind and name, and the
// one place components are built (so factory failures are reported the same way).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// The host builds every kind, so it sees them all.
#include "mixt/adapter.h"
#include "mixt/callback.h"
#include "mixt/dataset.h"
#include "mixt/model.h"
#include "mixt/optimizer.h"
#include "mixt/plugin.h"
#include "mixt/precision.h"
#include "mixt/scheduler.h"
#include "mixt/task.h"

namespace mixt {

const char* kind_name(ComponentKind kind);
// "model" (or "models") -> ComponentKind::model; nothing for any other word.
std::optional<ComponentKind> find_kind(const std::string& name);
// find_kind, or a usage error listing the kinds.
ComponentKind parse_kind(const std::string& name);
const std::vector<ComponentKind>& all_kinds();

struct PluginOrigin {
  std::string file;     // the shared library it came from
  std::string name;     // the plugin's own name
  std::string version;  // the plugin's own version
};

struct ComponentEntry {
  ComponentKind kind;
  std::string name;
  ComponentInfo info;
  PluginOrigin origin;
  ModelFactory model;
  OptimizerFactory optimizer;
  SchedulerFactory scheduler;
  PrecisionFactory precision;
  DatasetFactory dataset;
  CallbackFactory callback;
  TaskFactory task;
  AdapterFactory adapter;
  std::optional<TransformersConfig> transformers;  // a model's, when it reads transformers directories
  std::optional<TransformersDefaults> transformers_defaults;  // what fills the keys its config.json omits
};

class Registry : public Registrar {
 public:
  // Components added between begin_plugin and end_plugin are attributed to that plugin.
  void begin_plugin(PluginOrigin origin);
  // Returns how many components the plugin added.
  std::size_t end_plugin();
  // Ends a plugin whose registration failed part-way and removes what it added. Call it
  // while the plugin's library is loaded: the factories' code lives there.
  void discard_plugin();

  void register_model(const std::string& name, ComponentInfo info, ModelFactory factory) override;
  void register_optimizer(const std::string& name, ComponentInfo info, OptimizerFactory factory) override;
  void register_scheduler(const std::string& name, ComponentInfo info, SchedulerFactory factory) override;
  void register_precision(const std::string& name, ComponentInfo info, PrecisionFactory factory) override;
  void register_dataset(const std::string& name, ComponentInfo info, DatasetFactory factory) override;
  void register_callback(const std::string& name, ComponentInfo info, CallbackFactory factory) override;
  void register_task(const std::string& name, ComponentInfo info, TaskFactory factory) override;
  void register_transformers_config(const std::string& model, TransformersConfig config) override;
  void register_onnx_translation(const std::string& op, std::string onnx, OnnxTranslator translate) override;
  void register_transformers_defaults(const std::string& model, TransformersDefaults defaults) override;
  void register_adapter(const std::string& name, ComponentInfo info, AdapterFactory factory) override;

  // The entry, or a recipe error at the section's `name:` listing the known names.
  const ComponentEntry& find(ComponentKind kind, const Config& section) const;
  const ComponentEntry* find(ComponentKind kind, const std::string& name) const;
  std::vector<const ComponentEntry*> list(std::optional<ComponentKind> kind = {},
                                          const std::string& glob = "*") const;
  std::vector<std::string> names(ComponentKind kind) const;

  // Build the component a recipe section names. Errors thrown by the factory come back
  // as mixt errors naming the component and its plugin.
  std::shared_ptr<Model> make_model(const Config& section, const ModelContext& context) const;
  std::unique_ptr<Optimizer> make_optimizer(const Config& section, const OptimizerContext& context) const;
  std::unique_ptr<Scheduler> make_scheduler(const Config& section, const SchedulerContext& context) const;
  std::unique_ptr<PrecisionPolicy> make_precision(const Config& section,
                                                  const PrecisionContext& context) const;
  std::unique_ptr<Dataset> make_dataset(const Config& section, const DatasetContext& context) const;
  std::unique_ptr<Callback> make_callback(const Config& section, const CallbackContext& context) const;
  std::unique_ptr<Task> make_task(const Config& section, const TaskContext& context) const;
  std::unique_ptr<Adapter> make_adapter(const Config& section, const AdapterContext& context) const;

 private:
  ComponentEntry& add(ComponentKind kind, const std::string& name, ComponentInfo info);
  ComponentEntry& own_model(const std::string& model, const std::string& call);

  std::map<std::pair<ComponentKind, std::string>, ComponentEntry> entries_;
  std::optional<PluginOrigin> current_;
  std::vector<std::pair<ComponentKind, std::string>> added_by_current_;
  std::size_t translations_by_current_ = 0;  // ONNX translations the current plugin added
};

// Shell-style wildcard match ('*' and '?'), for `mixt list model 'resnet*'`.
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace mixt
