// mixt/helpers/safetensors.h — read and write safetensors files (https://github.com/huggingface/safetensors).
//
// The format is an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
// and the raw little-endian tensor bytes. It is what Python's safetensors.torch.save_file
// writes, so weights move between mixt and PyTorch/torchvision with the same names.
//
//   mixt::save_safetensors("model.safetensors", mixt::state_dict(model));
//   mixt::SafetensorsContents file = mixt::load_safetensors("model.safetensors");
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mixt {

// Named tensors, in order (a state dict).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct SafetensorsContents {
  NamedTensors tensors;                         // in file order, on the CPU
  std::map<std::string, std::string> metadata;  // the header's "__metadata__", if any
};

// Writes `tensors` (any device, any layout: they are copied to contiguous CPU memory).
// Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL. Names must be unique.
void save_safetensors(const std::filesystem::path& file, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a whole file. A file that is not valid safetensors is a mixt::Error naming it.
SafetensorsContents load_safetensors(const std::filesystem::path& file);

}  // namespace mixt
