#include "sdk/helpers/routed_models.h"

#include <map>

namespace mixt::routing {

namespace {
// Keyed by address, with the model's weak reference when a shared_ptr owns it.
std::map<const torch::nn::Module*, RoutedModel>& table() {
  static std::map<const torch::nn::Module*, RoutedModel> models;
  return models;
}
}  // namespace

std::mutex& mutex() {
  static std::mutex lock;
  return lock;
}

RoutedModel* find(const torch::nn::Module& model) {
  const auto entry = table().find(&model);
  if (entry == table().end()) return nullptr;
  if (entry->second.owned && entry->second.owner.expired()) {
    table().erase(entry);
    return nullptr;
  }
  return &entry->second;
}

RoutedModel& find_or_add(const torch::nn::Module& model) {
  if (RoutedModel* found = find(model)) return *found;
  RoutedModel& added = table()[&model];
  try {
    added.owner = model.shared_from_this();
    added.owned = true;
  } catch (const std::bad_weak_ptr&) {  // a model on the stack: its address is all there is
  }
  return added;
}

void drop_if_empty(const torch::nn::Module& model) {
  const RoutedModel* found = find(model);
  if (found && found->empty()) table().erase(&model);
}

}  // namespace mixt::routing
