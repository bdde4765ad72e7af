// mixt/plugin.h — what a plugin library is: one descriptor and one registration callback.
//
//   #include <mixt/options.h>  // includes mixt/plugin.h
//   const mixt::Option<double> kLr{"lr", 0.1, "learning rate"};  // declared once: read and described
//   static void register_components(mixt::Registrar& r) {
//     r.add_optimizer("sgd", {"SGD with momentum", {kLr}}, [](const mixt::Config& c, const auto& ctx) { ... });
//   }
//   MIXT_PLUGIN("sgd", "1.0.0", register_components)
//
// Build it with the CMake function mixt_add_plugin(). The host loads the library, reads
// the descriptor through the one exported symbol `mixt_plugin_info`, checks its ABI
// version and build fingerprint, and only then calls register_components.
#pragma once

#include <torch/version.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixt/callback.h"
#include "mixt/config.h"
#include "mixt/dataset.h"
#include "mixt/model.h"
#include "mixt/optimizer.h"
#include "mixt/option_doc.h"
#include "mixt/precision.h"
#include "mixt/scheduler.h"
#include "mixt/version.h"

namespace mixt {

enum class ComponentKind { model, optimizer, scheduler, precision, dataset, callback };

struct ComponentInfo {
  std::string summary;             // one line, shown by `mixt list`
  std::vector<OptionDoc> options;  // shown by `mixt describe`
  // Callbacks only: built with its defaults when the recipe does not list it; a recipe
  // turns it off with `callbacks: [{name: NAME, enabled: false}]`.
  bool enabled_by_default = false;
};

using ModelFactory = std::function<std::shared_ptr<Model>(const Config&, const ModelContext&)>;
using OptimizerFactory =
    std::function<std::unique_ptr<Optimizer>(const Config&, const OptimizerContext&)>;
using SchedulerFactory =
    std::function<std::unique_ptr<Scheduler>(const Config&, const SchedulerContext&)>;
using PrecisionFactory =
    std::function<std::unique_ptr<PrecisionPolicy>(const Config&, const PrecisionContext&)>;
using DatasetFactory =
    std::function<std::unique_ptr<Dataset>(const Config&, const DatasetContext&)>;
using CallbackFactory =
    std::function<std::unique_ptr<Callback>(const Config&, const CallbackContext&)>;

// Handed to a plugin's register_components. Names are lower_snake and unique per kind.
class Registrar {
 public:
  virtual ~Registrar() = default;
  virtual void add_model(const std::string& name, ComponentInfo info, ModelFactory factory) = 0;
  virtual void add_optimizer(const std::string& name, ComponentInfo info,
                             OptimizerFactory factory) = 0;
  virtual void add_scheduler(const std::string& name, ComponentInfo info,
                             SchedulerFactory factory) = 0;
  virtual void add_precision(const std::string& name, ComponentInfo info,
                             PrecisionFactory factory) = 0;
  virtual void add_dataset(const std::string& name, ComponentInfo info,
                           DatasetFactory factory) = 0;
  virtual void add_callback(const std::string& name, ComponentInfo info,
                            CallbackFactory factory) = 0;
};

// The descriptor. Its first three fields never move, whatever the ABI version: the host
// reads them before trusting anything else.
struct PluginDescriptor {
  std::uint32_t abi_major;
  std::uint32_t abi_minor;
  std::uint32_t struct_size;
  const char* name;
  const char* version;
  const char* mixt_version;
  const char* build_fingerprint;
  void (*register_components)(Registrar&);
};

}  // namespace mixt

#define MIXT_PLUGIN_ENTRY_SYMBOL "mixt_plugin_info"

// Declares the plugin. NAME and VERSION are string literals; REGISTER is a function
// `void (mixt::Registrar&)`. Writes the descriptor and the one exported C entry point.
#define MIXT_PLUGIN(NAME, VERSION, REGISTER)                                               \
  extern "C" __attribute__((visibility("default"))) const ::mixt::PluginDescriptor*       \
  mixt_plugin_info() {                                                                     \
    static const ::mixt::PluginDescriptor descriptor{                                      \
        MIXT_ABI_MAJOR,     MIXT_ABI_MINOR,         sizeof(::mixt::PluginDescriptor), NAME, \
        VERSION,            MIXT_VERSION_STRING,    MIXT_BUILD_FINGERPRINT,           &REGISTER}; \
    return &descriptor;                                                                    \
  }
