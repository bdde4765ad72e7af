#include "checkpoint/model_state.h"

#include <algorithm>
#include <set>

#include "sdk/helpers/state_dict_check.h"

namespace mixt {

namespace {
constexpr const char* kFrozenBaseOmitted = "frozen_base_omitted";

// Module::save's layout (own parameters, own buffers, then one nested archive per child),
// leaving out the frozen parameters.
void save_trainable(const torch::nn::Module& module, torch::serialize::OutputArchive& archive) {
  for (const auto& parameter : module.named_parameters(/*recurse=*/false)) {
    if (parameter.value().requires_grad()) archive.write(parameter.key(), parameter.value());
  }
  for (const auto& buffer : module.named_buffers(/*recurse=*/false)) {
    archive.write(buffer.key(), buffer.value(), /*is_buffer=*/true);
  }
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;  // as Module::save
    torch::serialize::OutputArchive nested(archive.compilation_unit());
    save_trainable(*child.value(), nested);
    archive.write(child.key(), nested);
  }
}
}  // namespace

void save_model_state(const torch::nn::Module& model, bool omit_frozen, torch::serialize::OutputArchive& archive) {
  if (!omit_frozen) {
    model.save(archive);
    return;
  }
  save_trainable(model, archive);
  archive.write(kFrozenBaseOmitted, c10::IValue(true));
}

bool omits_frozen_base(torch::serialize::InputArchive& model_archive) {
  c10::IValue marker;
  return model_archive.try_read(kFrozenBaseOmitted, marker) && marker.isBool() && marker.toBool();
}

LoadReport checkpoint_fit(const torch::nn::Module& model, const NamedTensors& saved, bool frozen_base_omitted) {
  LoadReport fit = compare_state_dict(model, saved);
  if (!frozen_base_omitted) return fit;
  std::set<std::string> frozen;
  for (const auto& parameter : model.named_parameters(/*recurse=*/true)) {
    if (!parameter.value().requires_grad()) frozen.insert(parameter.key());
  }
  fit.missing.erase(std::remove_if(fit.missing.begin(), fit.missing.end(),
                                   [&](const std::string& name) { return frozen.count(name) > 0; }),
                    fit.missing.end());
  return fit;
}

}  // namespace mixt
