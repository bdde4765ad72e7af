// Fuzz target: a safetensors file (mixt::load_safetensors). What must hold:
//   - the reader accepts or refuses with a mixt::Error (never a crash, a Torch exception or
//     an allocation the header alone asks for);
//   - a file it accepts, written back with save_safetensors and read again, gives the same
//     names, dtypes, shapes, bytes and metadata.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz_check.h"
#include "mixt/error.h"
#include "mixt/helpers/safetensors.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const ScratchFile file("in.safetensors", data, size);
  mixt::SafetensorsContents read;
  try {
    read = mixt::load_safetensors(file.path);
  } catch (const mixt::Error&) {
    return 0;
  }
  const ScratchFile again("again.safetensors");
  mixt::save_safetensors(again.path, read.tensors, read.metadata);
  const mixt::SafetensorsContents reread = mixt::load_safetensors(again.path);
  MIXT_FUZZ_CHECK(reread.tensors.size() == read.tensors.size(), "a tensor was lost writing back");
  MIXT_FUZZ_CHECK(reread.metadata == read.metadata, "the metadata changed writing back");
  for (std::size_t i = 0; i < read.tensors.size(); ++i) {
    const auto& [name, tensor] = read.tensors[i];
    const auto& [name_again, tensor_again] = reread.tensors[i];
    MIXT_FUZZ_CHECK(name == name_again, "a name changed writing back");
    MIXT_FUZZ_CHECK(tensor.scalar_type() == tensor_again.scalar_type(), "a dtype changed writing back");
    MIXT_FUZZ_CHECK(tensor.sizes() == tensor_again.sizes(), "a shape changed writing back");
    MIXT_FUZZ_CHECK(tensor.numel() == 0 || std::equal(static_cast<const char*>(tensor.data_ptr()),
                                                      static_cast<const char*>(tensor.data_ptr()) + tensor.nbytes(),
                                                      static_cast<const char*>(tensor_again.data_ptr())),
                    "the bytes changed writing back");
  }
  return 0;
}
