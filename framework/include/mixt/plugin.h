// mixt/plugin.h — what a plugin library is: one descriptor and one registration callback.
//
//   #include <mixt/optimizer.h>  // the kinds the plugin provides: one header each
//   #include <mixt/plugin.h>
//   struct SgdOptions { double lr = 0; double momentum = 0; };
//   const auto kOptions = mixt::OptionsOf<SgdOptions>()
//       .required(&SgdOptions::lr, "lr", "learning rate", mixt::at_least(0))
//       .add(&SgdOptions::momentum, "momentum", "momentum factor");
//   static void register_components(mixt::Registrar& r) {
//     r.add_optimizer("sgd", "SGD with momentum", kOptions,
//                     [](const SgdOptions& o, const mixt::OptimizerContext& context) { ... });
//   }
//   MIXT_PLUGIN("sgd", "1.0.0", register_components)
//
// A factory receives its options read and checked (mixt/options.h), never the recipe
// itself: the declaration is the one place a key is named, read and documented.
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
#include <utility>
#include <vector>

#include "mixt/config.h"
#include "mixt/option_doc.h"
#include "mixt/options.h"
#include "mixt/version.h"

namespace mixt {

// The eight kinds; each is declared in its own header (mixt/model.h, mixt/optimizer.h, ...).
class Model;
class Optimizer;
class Scheduler;
class PrecisionPolicy;
class Dataset;
class Callback;
class Task;
class Adapter;  // since 6.9, mixt/adapter.h
struct ModelContext;
struct OptimizerContext;
struct SchedulerContext;
struct PrecisionContext;
struct DatasetContext;
struct CallbackContext;
struct TaskContext;
struct AdapterContext;
class OnnxOp;  // mixt/onnx_translation.h
using OnnxTranslator = std::function<void(OnnxOp& op)>;

// adapter since 6.9, last, so that the values before it keep theirs.
enum class ComponentKind { model, optimizer, scheduler, precision, dataset, callback, task, adapter };

// What `mixt list` and `mixt describe` show of a component.
struct ComponentInfo {
  std::string summary;             // one line, shown by `mixt list`
  std::vector<OptionDoc> options;  // shown by `mixt describe`
  // Callbacks only: built with its defaults when the recipe does not list it; a recipe
  // turns it off with `callbacks: [{name: NAME, enabled: false}]`.
  bool enabled_by_default = false;
};

// For add_callback: whether a recipe that does not list the callback gets it anyway.
enum class WhenUnlisted { off, on };

// How a model reads a Hugging Face transformers checkpoint directory (`model: {name: N,
// from: DIR}`): which config.json it understands and which of its keys fill which option.
// mixt does the rest: the options the recipe does not give are taken from config.json (one it
// gives must agree, or it is an error naming both), the weights from the directory's
// safetensors (sharded ones too), the tokenizer from its tokenizer.json. Since ABI 6.1.
struct TransformersConfig {
  std::vector<std::string> model_types;  // config.json's "model_type" values read ("gpt2")
  // config.json key -> option name, e.g. {"n_layer", "num_layers"}; a null or absent key is
  // skipped. A dotted key names a nested one ({"rope_parameters.rope_theta", "rope_theta"},
  // since 6.2); several keys may fill one option (they must then agree).
  std::vector<std::pair<std::string, std::string>> options;
  // config.json key -> the only value the model implements, as JSON text, e.g.
  // {"activation_function", "\"gelu_new\""}; absent keys are taken as agreeing.
  std::vector<std::pair<std::string, std::string>> implements;
};

// What transformers' config class takes for a key that config.json leaves out, so that a
// published file written before the key existed reads as transformers reads it (Llama-2's
// has no rope_theta: LlamaConfig's 10000, not a preset's). Since ABI 6.8.
struct TransformersDefaults {
  std::string config_class;  // "LlamaConfig", named where a default fills an option
  // config.json key -> the class's default as JSON text, e.g. {"rope_theta", "10000.0"}. The
  // key is one TransformersConfig::options maps; its default fills that option when no key
  // mapped to the option is present.
  std::vector<std::pair<std::string, std::string>> values;
  // config.json key -> the key whose value it takes when absent, e.g.
  // {"num_key_value_heads", "num_attention_heads"}.
  std::vector<std::pair<std::string, std::string>> copies;
};

// The host's side of a factory: the recipe section and the context.
using ModelFactory = std::function<std::shared_ptr<Model>(const Config&, const ModelContext&)>;
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(const Config&, const OptimizerContext&)>;
using SchedulerFactory = std::function<std::unique_ptr<Scheduler>(const Config&, const SchedulerContext&)>;
using PrecisionFactory = std::function<std::unique_ptr<PrecisionPolicy>(const Config&, const PrecisionContext&)>;
using DatasetFactory = std::function<std::unique_ptr<Dataset>(const Config&, const DatasetContext&)>;
using CallbackFactory = std::function<std::unique_ptr<Callback>(const Config&, const CallbackContext&)>;
using TaskFactory = std::function<std::unique_ptr<Task>(const Config&, const TaskContext&)>;
using AdapterFactory = std::function<std::unique_ptr<Adapter>(const Config&, const AdapterContext&)>;

// Handed to a plugin's register_components. Names are lower_snake and unique per kind. Each
// add_KIND takes the component's options and a factory of (const S& options, const
// KINDContext&); the options are read and checked before the factory runs.
class Registrar {
 public:
  virtual ~Registrar() = default;

  template <class S, class F>
  void add_model(const std::string& name, std::string summary, const OptionsOf<S>& options, F factory) {
    register_model(name, {std::move(summary), options.docs()}, bind<std::shared_ptr<Model>, ModelContext>(options, factory));
  }
  template <class S, class F>
  void add_optimizer(const std::string& name, std::string summary, const OptionsOf<S>& options, F factory) {
    register_optimizer(name, {std::move(summary), options.docs()},
                       bind<std::unique_ptr<Optimizer>, OptimizerContext>(options, factory));
  }
  template <class S, class F>
  void add_scheduler(const std::string& name, std::string summary, const OptionsOf<S>& options, F factory) {
    register_scheduler(name, {std::move(summary), options.docs()},
                       bind<std::unique_ptr<Scheduler>, SchedulerContext>(options, factory));
  }
  template <class S, class F>
  void add_precision(const std::string& name, std::string summary, const OptionsOf<S>& options, F factory) {
    register_precision(name, {std::move(summary), options.docs()},
                       bind<std::unique_ptr<PrecisionPolicy>, PrecisionContext>(options, factory));
  }
  template <class S, class F>
  void add_dataset(const std::string& name, std::string summary, const OptionsOf<S>& options, F factory) {
    register_dataset(name, {std::move(summary), options.docs()},
                     bind<std::unique_ptr<Dataset>, DatasetContext>(options, factory));
  }
  template <class S, class F>
  void add_callback(const std::string& name, std::string summary, const OptionsOf<S>& options, F factory,
                    WhenUnlisted when_unlisted = WhenUnlisted::off) {
    register_callback(name, {std::move(summary), options.docs(), when_unlisted == WhenUnlisted::on},
                      bind<std::unique_ptr<Callback>, CallbackContext>(options, factory));
  }
  // Since ABI 6.1: after add_model(name, ...), how that model reads a transformers directory.
  void read_transformers_config(const std::string& model, TransformersConfig config) {
    register_transformers_config(model, std::move(config));
  }
  // Since ABI 6.8: after read_transformers_config(model, ...), what transformers' config
  // class takes for the keys a config.json omits. Without it an absent key leaves the option
  // at the model's own default.
  void read_transformers_defaults(const std::string& model, TransformersDefaults defaults) {
    register_transformers_defaults(model, std::move(defaults));
  }
  // Since ABI 6.3: how `mixt export` writes the traced op `op` ("aten::my_op", or a custom
  // op's "myops::swish") in ONNX (mixt/onnx_translation.h); `onnx` says what it becomes, for
  // `mixt export --list-ops`. It wins over a built-in translation of the same op.
  void add_onnx_translation(const std::string& op, std::string onnx, OnnxTranslator translate) {
    register_onnx_translation(op, std::move(onnx), std::move(translate));
  }
  // Since ABI 5.1.
  template <class S, class F>
  void add_task(const std::string& name, std::string summary, const OptionsOf<S>& options, F factory) {
    register_task(name, {std::move(summary), options.docs()}, bind<std::unique_ptr<Task>, TaskContext>(options, factory));
  }
  // Since ABI 6.9: an adapter (mixt/adapter.h), which a recipe's `adapter:` section names.
  template <class S, class F>
  void add_adapter(const std::string& name, std::string summary, const OptionsOf<S>& options, F factory) {
    register_adapter(name, {std::move(summary), options.docs()},
                     bind<std::unique_ptr<Adapter>, AdapterContext>(options, factory));
  }

 protected:
  // What the add_KIND calls come to; implemented by the host.
  virtual void register_model(const std::string& name, ComponentInfo info, ModelFactory factory) = 0;
  virtual void register_optimizer(const std::string& name, ComponentInfo info, OptimizerFactory factory) = 0;
  virtual void register_scheduler(const std::string& name, ComponentInfo info, SchedulerFactory factory) = 0;
  virtual void register_precision(const std::string& name, ComponentInfo info, PrecisionFactory factory) = 0;
  virtual void register_dataset(const std::string& name, ComponentInfo info, DatasetFactory factory) = 0;
  virtual void register_callback(const std::string& name, ComponentInfo info, CallbackFactory factory) = 0;
  // Last in the table: a plugin built before 5.1 never reaches it.
  virtual void register_task(const std::string& name, ComponentInfo info, TaskFactory factory) = 0;
  // After it, likewise for 6.1.
  virtual void register_transformers_config(const std::string& model, TransformersConfig config) = 0;
  // And for 6.3.
  virtual void register_onnx_translation(const std::string& op, std::string onnx, OnnxTranslator translate) = 0;
  // And for 6.8.
  virtual void register_transformers_defaults(const std::string& model, TransformersDefaults defaults) = 0;
  // And for 6.9.
  virtual void register_adapter(const std::string& name, ComponentInfo info, AdapterFactory factory) = 0;

 private:
  template <class Made, class Context, class S, class F>
  static std::function<Made(const Config&, const Context&)> bind(const OptionsOf<S>& options, F factory) {
    return [options, factory](const Config& section, const Context& context) -> Made {
      return factory(options.read(section), context);
    };
  }
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
