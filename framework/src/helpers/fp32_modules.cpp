#include "mixt/helpers/fp32_modules.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace mixt {

namespace {
// Kept beside the models rather than inside mixt::Model so that the SDK class layout (and
// with it the plugin ABI) does not change. Keyed by address, with the model's weak
// reference when a shared_ptr owns it: a model built later at a freed model's address must
// not inherit its list.
struct Fp32Modules {
  std::weak_ptr<const torch::nn::Module> owner;
  bool owned = false;
  std::set<std::string, std::less<>> listed;
  std::set<std::string, std::less<>> routed;
};
std::mutex mutex;
std::map<const torch::nn::Module*, Fp32Modules>& table() {
  static std::map<const torch::nn::Module*, Fp32Modules> modules;
  return modules;
}

// The entry of `model`, or null; an entry whose model is gone is dropped. Under `mutex`.
Fp32Modules* entry_of(const torch::nn::Module& model) {
  const auto entry = table().find(&model);
  if (entry == table().end()) return nullptr;
  if (entry->second.owned && entry->second.owner.expired()) {
    table().erase(entry);
    return nullptr;
  }
  return &entry->second;
}
// Observers are rare (mixt diagnose): a count lets every other routed call skip the lock.
std::atomic<int> observer_count{0};
std::map<const torch::nn::Module*, SubmoduleObserver*>& observers() {  // under `mutex`
  static std::map<const torch::nn::Module*, SubmoduleObserver*> table;
  return table;
}
}  // namespace

void set_fp32_modules(const torch::nn::Module& model, std::vector<std::string> names) {
  std::lock_guard<std::mutex> lock(mutex);
  if (names.empty()) {
    table().erase(&model);
    return;
  }
  Fp32Modules modules{{}, false, {names.begin(), names.end()}, {}};
  try {
    modules.owner = model.shared_from_this();
    modules.owned = true;
  } catch (const std::bad_weak_ptr&) {  // a model on the stack: its address is all there is
  }
  table()[&model] = std::move(modules);
}

bool keeps_in_fp32(const torch::nn::Module& model, std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex);
  Fp32Modules* entry = entry_of(model);
  if (!entry) return false;
  const auto listed = entry->listed.find(name);
  if (listed == entry->listed.end()) return false;
  entry->routed.insert(*listed);
  return true;
}

std::vector<std::string> unrouted_fp32_modules(const torch::nn::Module& model) {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::string> missing;
  const Fp32Modules* entry = entry_of(model);
  if (!entry) return missing;
  std::set_difference(entry->listed.begin(), entry->listed.end(), entry->routed.begin(), entry->routed.end(),
                      std::back_inserter(missing));
  return missing;
}

void set_submodule_observer(const torch::nn::Module& model, SubmoduleObserver* observer) {
  std::lock_guard<std::mutex> lock(mutex);
  if (observer) {
    observers()[&model] = observer;
  } else {
    observers().erase(&model);
  }
  observer_count.store(static_cast<int>(observers().size()));
}

SubmoduleObserver* submodule_observer(const torch::nn::Module& model) {
  if (observer_count.load(std::memory_order_relaxed) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = observers().find(&model);
  return found == observers().end() ? nullptr : found->second;
}

}  // namespace mixt
