// mixt/helpers/named_tensors_archive.h — named tensors (a state_dict) in a checkpoint archive.
//
// For a callback's save()/load() that keeps weights of its own (an EMA of the model's):
// the names are stored as a list beside the tensors, so dotted names need no nesting and
// `mixt export` can read them back without the callback.
#pragma once

#include <ATen/core/List.h>
#include <torch/serialize/archive.h>

#include <string>

#include "mixt/helpers/safetensors.h"

namespace mixt {

inline void write_named_tensors(torch::serialize::OutputArchive& archive, const NamedTensors& tensors) {
  c10::List<std::string> names;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    names.push_back(tensors[i].first);
    archive.write("tensor_" + std::to_string(i), tensors[i].second, /*is_buffer=*/true);
  }
  archive.write("names", c10::IValue(names));
}

// Empty when the archive holds none (a checkpoint from a run without the callback).
inline NamedTensors read_named_tensors(torch::serialize::InputArchive& archive) {
  NamedTensors tensors;
  c10::IValue names;
  if (!archive.try_read("names", names)) return tensors;
  const auto list = names.toListRef();
  for (std::size_t i = 0; i < list.size(); ++i) {
    at::Tensor tensor;
    archive.read("tensor_" + std::to_string(i), tensor, /*is_buffer=*/true);
    tensors.emplace_back(list[i].toStringRef(), tensor);
  }
  return tensors;
}

}  // namespace mixt
