#include "mixt/helpers/fp32_modules.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

namespace mixt {

namespace {
// Kept beside the models rather than inside mixt::Model so that the SDK class layout (and
// with it the plugin ABI) does not change. Models live for the whole process in practice;
// an entry is replaced when a new list is set for the same address.
struct Fp32Modules {
  std::set<std::string, std::less<>> listed;
  std::set<std::string, std::less<>> routed;
};
std::mutex mutex;
std::map<const torch::nn::Module*, Fp32Modules>& table() {
  static std::map<const torch::nn::Module*, Fp32Modules> modules;
  return modules;
}
}  // namespace

void set_fp32_modules(const torch::nn::Module& model, std::vector<std::string> names) {
  std::lock_guard<std::mutex> lock(mutex);
  if (names.empty()) {
    table().erase(&model);
    return;
  }
  table()[&model] = Fp32Modules{{names.begin(), names.end()}, {}};
}

bool keeps_in_fp32(const torch::nn::Module& model, std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex);
  auto entry = table().find(&model);
  if (entry == table().end()) return false;
  auto listed = entry->second.listed.find(name);
  if (listed == entry->second.listed.end()) return false;
  entry->second.routed.insert(*listed);
  return true;
}

std::vector<std::string> unrouted_fp32_modules(const torch::nn::Module& model) {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::string> missing;
  auto entry = table().find(&model);
  if (entry == table().end()) return missing;
  std::set_difference(entry->second.listed.begin(), entry->second.listed.end(), entry->second.routed.begin(),
                      entry->second.routed.end(), std::back_inserter(missing));
  return missing;
}

}  // namespace mixt
