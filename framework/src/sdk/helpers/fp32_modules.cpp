#include "mixt/helpers/fp32_modules.h"

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
