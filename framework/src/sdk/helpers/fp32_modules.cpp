#include "mixt/helpers/fp32_modules.h"

#include <torch/csrc/jit/frontend/tracer.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "sdk/helpers/routed_models.h"

namespace mixt {

namespace {
// Observers are rare (mixt diagnose): a count lets every other routed call skip the lock.
std::atomic<int> observer_count{0};
std::map<const torch::nn::Module*, SubmoduleObserver*>& observers() {  // under routing::mutex()
  static std::map<const torch::nn::Module*, SubmoduleObserver*> table;
  return table;
}
}  // namespace

namespace detail {
// The graph's current scope, not Graph::push_scope: that one also opens a
// prim::TracedModuleForward block, which the tracer would then turn into a call of a
// submodule named `name` (Python's trace names its scopes after module attributes; a routed
// name need not be one).
TraceScope::TraceScope(std::string_view name) {
  if (const auto& state = torch::jit::tracer::getTracingState()) {
    state->graph->set_current_scope(state->graph->current_scope()->push(c10::Symbol::scope(std::string(name))));
    pushed_ = true;
  }
}

TraceScope::~TraceScope() {
  if (!pushed_) return;
  if (const auto& state = torch::jit::tracer::getTracingState()) {
    state->graph->set_current_scope(state->graph->current_scope()->parent());
  }
}
}  // namespace detail

void set_fp32_modules(const torch::nn::Module& model, std::vector<std::string> names) {
  std::lock_guard<std::mutex> lock(routing::mutex());
  routing::RoutedModel& entry = routing::find_or_add(model);
  entry.fp32_listed = {names.begin(), names.end()};
  entry.fp32_routed.clear();
  routing::drop_if_empty(model);
}

bool keeps_in_fp32(const torch::nn::Module& model, std::string_view name) {
  std::lock_guard<std::mutex> lock(routing::mutex());
  routing::RoutedModel* entry = routing::find(model);
  if (!entry) return false;
  const auto listed = entry->fp32_listed.find(name);
  if (listed == entry->fp32_listed.end()) return false;
  entry->fp32_routed.insert(*listed);
  return true;
}

std::vector<std::string> unrouted_fp32_modules(const torch::nn::Module& model) {
  std::lock_guard<std::mutex> lock(routing::mutex());
  std::vector<std::string> missing;
  const routing::RoutedModel* entry = routing::find(model);
  if (!entry) return missing;
  std::set_difference(entry->fp32_listed.begin(), entry->fp32_listed.end(), entry->fp32_routed.begin(),
                      entry->fp32_routed.end(), std::back_inserter(missing));
  return missing;
}

void set_submodule_observer(const torch::nn::Module& model, SubmoduleObserver* observer) {
  std::lock_guard<std::mutex> lock(routing::mutex());
  if (observer) {
    observers()[&model] = observer;
  } else {
    observers().erase(&model);
  }
  observer_count.store(static_cast<int>(observers().size()));
}

SubmoduleObserver* submodule_observer(const torch::nn::Module& model) {
  if (observer_count.load(std::memory_order_relaxed) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(routing::mutex());
  const auto found = observers().find(&model);
  return found == observers().end() ? nullptr : found->second;
}

}  // namespace mixt
