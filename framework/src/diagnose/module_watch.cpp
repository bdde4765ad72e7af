#include "diagnose/module_watch.h"

#include <algorithm>
#include <iterator>

namespace mixt::diagnose {

ModuleWatch::ModuleWatch(const torch::nn::Module& model, Observations& into) : model_(model), into_(into) {
  set_submodule_observer(model_, this);
}

ModuleWatch::~ModuleWatch() { set_submodule_observer(model_, nullptr); }

void ModuleWatch::observe(std::string_view name, const at::Tensor& output) {
  const OutputCounts counts = count_output(output);
  auto entry = std::find_if(into_.modules.begin(), into_.modules.end(),
                            [&](const auto& module) { return module.first == name; });
  if (entry == into_.modules.end()) {
    into_.modules.emplace_back(std::string(name), OutputCounts{});
    entry = std::prev(into_.modules.end());
  }
  entry->second.add(counts);
  if (counts.nonfinite > 0 && !into_.first_nonfinite) into_.first_nonfinite = FirstNonFinite{std::string(name), step_};
}

}  // namespace mixt::diagnose
