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

// Since ABI 6.10. A file read one tensor at a time: loading weights into a model then holds
// at most one tensor beside the model (none with read_into), not the whole file.
class SafetensorsReader {
 public:
  // Reads and checks the header (every tensor's offsets against the file), as load_safetensors.
  explicit SafetensorsReader(const std::filesystem::path& file);
  // Each tensor's name with an empty tensor of its dtype and shape on the meta device, in
  // file order.
  const NamedTensors& layout() const { return layout_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensor `index` of layout(), read from the file now, on the CPU.
  at::Tensor read(std::size_t index) const;
  // Tensor `index` into `target` (its shape; converted to its dtype and device), straight
  // into its memory when it is a contiguous CPU tensor of the file's dtype.
  void read_into(std::size_t index, const at::Tensor& target) const;

 private:
  void read_bytes(std::size_t index, void* destination) const;
  std::filesystem::path file_;
  std::uint64_t data_start_ = 0;
  NamedTensors layout_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges_;  // each tensor's bytes, from the data's start
  std::map<std::string, std::string> metadata_;
};

}  // namespace mixt
