#include "diagnose/module_watch.h"

#include <algorithm>
#include <cmath>

namespace mixt::diagnose {

std::int64_t Observations::skipped() const {
  return std::count_if(steps.begin(), steps.end(), [](const StepRecord& s) { return !s.applied; });
}

bool Observations::losses_finite() const {
  return std::all_of(steps.begin(), steps.end(), [](const StepRecord& s) { return std::isfinite(s.loss); });
}

bool Observations::healthy(double max_skipped_fraction) const {
  return !steps.empty() && losses_finite() &&
         static_cast<double>(skipped()) <= max_skipped_fraction * static_cast<double>(steps.size());
}

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
