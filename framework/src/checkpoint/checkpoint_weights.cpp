#include "checkpoint/checkpoint_weights.h"

#include <map>

#include "checkpoint/model_state.h"
#include "mixt/helpers/named_tensors_archive.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {
// The ema callback's average from a checkpoint's callback state: keyed "ema" (or "ema:LABEL"
// when the recipe had two), or "INDEX_ema" in checkpoints before state was keyed by name.
NamedTensors ema_weights(CheckpointContents& contents, const fs::path& file) {
  torch::serialize::InputArchive callbacks;
  const bool keyed = contents.archive.try_read("callback_state", callbacks);
  if (keyed || contents.archive.try_read("callbacks", callbacks)) {
    for (const std::string& key : callbacks.keys()) {
      const std::string name = keyed ? key.substr(0, key.find(':')) : key.substr(key.find('_') + 1);
      if (name != "ema") continue;
      torch::serialize::InputArchive ema;
      callbacks.read(key, ema);
      NamedTensors tensors = read_named_tensors(ema);
      if (!tensors.empty()) return tensors;
    }
  }
  throw Error(ErrorKind::recipe, "this checkpoint holds no EMA weights: its run had no ema callback",
              SourceLocation{file.string()}, {},
              "add `callbacks: [{name: ema}]` to the recipe and train again, or leave out --ema for the model's own "
              "weights");
}

NamedTensors model_weights(CheckpointContents& contents, torch::serialize::InputArchive& model) {
  NamedTensors tensors = flatten_archive(model);
  torch::serialize::InputArchive precision, masters;
  if (!contents.archive.try_read("precision", precision) || !precision.try_read("master_weights", masters)) {
    return tensors;
  }
  std::map<std::string, at::Tensor> real;
  for (auto& [name, tensor] : read_named_tensors(masters)) real.emplace(name, tensor);
  for (auto& [name, tensor] : tensors) {
    if (const auto found = real.find(name); found != real.end()) tensor = found->second;
  }
  return tensors;
}
}  // namespace

NamedTensors checkpoint_weights(CheckpointContents& contents, const fs::path& file, bool ema) {
  torch::serialize::InputArchive model;
  if (!contents.archive.try_read("model", model)) {
    throw Error(ErrorKind::recipe, "this checkpoint holds no model state", SourceLocation{file.string()});
  }
  return ema ? ema_weights(contents, file) : model_weights(contents, model);
}

bool omits_frozen_base(CheckpointContents& contents) {
  torch::serialize::InputArchive model;
  return contents.archive.try_read("model", model) && omits_frozen_base(model);
}

}  // namespace mixt
