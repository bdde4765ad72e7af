#include "assembly/routing_probe.h"

#include <algorithm>

#include "assembly/model_input.h"
#include "common/closest_match.h"
#include "mixt/helpers/activation_checkpointing.h"
#include "mixt/helpers/fp32_modules.h"

namespace mixt {

namespace {
class RoutedNames : public SubmoduleObserver {
 public:
  void observe(std::string_view name, const at::Tensor&) override {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.emplace_back(name);
  }
  std::vector<std::string> names;
};

// Installs the probe's observer for one pass, and gives the model back its own (diagnose's).
class ObserverSwap {
 public:
  ObserverSwap(const Model& model, SubmoduleObserver* probe) : model_(model), previous_(submodule_observer(model)) {
    set_submodule_observer(model_, probe);
  }
  ~ObserverSwap() { set_submodule_observer(model_, previous_); }
  ObserverSwap(const ObserverSwap&) = delete;
  ObserverSwap& operator=(const ObserverSwap&) = delete;

 private:
  const Model& model_;
  SubmoduleObserver* previous_;
};
}  // namespace

Routing probe_routing(const Components& components, const RunFacts& facts, bool with_blocks,
                      const ActivationCheckpointing& choice) {
  Routing routing;
  const std::vector<std::int64_t> shape = components.train->sample_shape();
  if (shape.empty()) return routing;

  const Model& model = *components.model;
  RoutedNames observed;
  if (with_blocks) set_activation_checkpointing(model, ActivationCheckpointing{true, {}});
  {
    ObserverSwap swap(model, &observed);
    forward_blank_batch(components, facts, shape);  // as the build's: two samples
  }
  if (with_blocks) {
    routing.blocks = checkpointed_submodules(model);
    set_activation_checkpointing(model, choice);
  }
  routing.routed = std::move(observed.names);
  return routing;
}

std::string routed_names_hint(const std::string& name, const std::vector<std::string>& routed) {
  if (routed.empty()) {
    return "the model routes no submodule through mixt::call_submodule, so neither fp32_modules nor a list of "
           "submodules to recompute can apply to it (docs/plugins.md, \"A model\")";
  }
  return suggestion_hint(name, routed, "the submodules it routes");
}

}  // namespace mixt
