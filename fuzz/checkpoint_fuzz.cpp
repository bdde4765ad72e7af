// Fuzz target: a checkpoint file (read_checkpoint: header, JSON, LibTorch archive, trailer)
// found as a run's checkpoints/last (resolve_checkpoint, which ranks candidates by their
// headers), and the same bytes as a sharded optimizer's manifest (parse_shard_manifest).
// What must hold:
//   - resolving and reading accept or refuse with a mixt::Error; the manifest parser with a
//     std::invalid_argument (the checkpointer's error at the checkpoint); nothing else escapes;
//   - a checkpoint read, written back by write_checkpoint with its archive's tensors (those
//     dense on the CPU) and read again, has the same header and the same names, dtypes,
//     shapes and bytes;
//   - a manifest read, written again line by line, reads as the same manifest.
// Format 1 files (no trailer of their own) are checked entry by entry against the zip's
// CRC-32s (checkpoint/zip_entries.h) before LibTorch reads them.
#include <torch/serialize/output-archive.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "checkpoint/checkpoint.h"
#include "distributed/shard_manifest.h"
#include "fuzz_check.h"
#include "mixt/error.h"
#include "scratch_file.h"

namespace {

namespace fs = std::filesystem;

bool dense(const mixt::NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined() || tensor.layout() != at::kStrided || !tensor.device().is_cpu() || tensor.is_quantized())
      return false;
  }
  return true;
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.nbytes() == y.nbytes() && (x.nbytes() == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0);
}

void check_round_trip(const mixt::CheckpointContents& read, mixt::NamedTensors tensors) {
  torch::serialize::OutputArchive archive;
  for (const auto& [name, tensor] : tensors) archive.write(name, tensor);
  const ScratchFile again("again.ckpt");
  mixt::write_checkpoint(again.path, read.header, archive);
  mixt::CheckpointContents reread = mixt::read_checkpoint(again.path);
  MIXT_FUZZ_CHECK(reread.header == read.header, "the header changed written back");
  const mixt::NamedTensors tensors_again = mixt::flatten_archive(reread.archive);
  MIXT_FUZZ_CHECK(tensors_again.size() == tensors.size(), "a tensor was lost written back");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& a = tensors[i].second;
    const at::Tensor& b = tensors_again[i].second;
    MIXT_FUZZ_CHECK(tensors[i].first == tensors_again[i].first, "a name changed written back");
    MIXT_FUZZ_CHECK(a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes(), "a dtype or shape changed");
    MIXT_FUZZ_CHECK(same_bytes(a, b), "the bytes changed written back");
  }
}

void check_checkpoint(const std::uint8_t* data, std::size_t size) {
  const ScratchFile run("run");
  const fs::path file = run.path / "checkpoints" / "last";
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  mixt::CheckpointContents read;
  mixt::NamedTensors tensors;
  try {
    const fs::path resolved = mixt::resolve_checkpoint(run.path);
    MIXT_FUZZ_CHECK(resolved == fs::canonical(file), "resolve_checkpoint named another file");
    read = mixt::read_checkpoint(resolved);
    tensors = mixt::flatten_archive(read.archive);
  } catch (const mixt::Error&) {
    return;
  }
  if (dense(tensors)) check_round_trip(read, tensors);
}

void check_manifest(const std::string& text) {
  mixt::distributed::ShardManifest manifest;
  try {
    manifest = mixt::distributed::parse_shard_manifest(text);
  } catch (const std::invalid_argument&) {
    return;
  }
  MIXT_FUZZ_CHECK(manifest.world_size >= 1, "a manifest of no rank");
  std::string written = "sharding zero1\nworld_size " + std::to_string(manifest.world_size) + "\n";
  for (const auto& [name, line] : manifest.tensors) {
    MIXT_FUZZ_CHECK(line.rfind(name, 0) == 0 && (line.size() == name.size() || line[name.size()] == ' '),
                    "a tensor's name is not its line's first word");
    written += line + "\n";
  }
  const mixt::distributed::ShardManifest again = mixt::distributed::parse_shard_manifest(written);
  MIXT_FUZZ_CHECK(again.world_size == manifest.world_size && again.tensors == manifest.tensors,
                  "the manifest changed written again");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_checkpoint(data, size);
  check_manifest(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
