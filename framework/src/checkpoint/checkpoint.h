// Checkpoint files: a header (magic, format version, JSON with the versions and plugins
// that made it) followed by a LibTorch archive of model, optimizer, scheduler, precision
// policy and trainer state. Written atomically: temp file, fsync, rename.
#pragma once

#include <torch/serialize/archive.h>

#include <filesystem>
#include <string>
#include <nlohmann/json.hpp>

#include "mixt/error.h"
#include "mixt/helpers/safetensors.h"

namespace mixt {

inline constexpr char kCheckpointMagic[8] = {'M', 'I', 'X', 'T', 'C', 'K', 'P', 'T'};
// Format 2 ends with a trailer: the archive's size and CRC-32, then kCheckpointEnd. LibTorch
// reads its zip archive without checking the CRCs inside it, so a flipped bit in a tensor
// loaded silently; and a file cut short is told from a damaged one. Format 1 (no trailer)
// is still read.
inline constexpr std::uint32_t kCheckpointFormat = 2;
inline constexpr char kCheckpointEnd[8] = {'M', 'I', 'X', 'T', 'E', 'N', 'D', '2'};

void write_checkpoint(const std::filesystem::path& file, const nlohmann::json& header,
                      torch::serialize::OutputArchive& archive);

struct CheckpointContents {
  nlohmann::json header;
  torch::serialize::InputArchive archive;
};

// Throws a runtime error naming the file when it is not a mixt checkpoint, is of another
// format version, or is damaged. Its tensors are restored on `device` whatever device they
// were saved from (map_location): a checkpoint of cuda:0 is read on a machine without a
// GPU, by rank 1 on its cuda:1, or by a CPU run. LibTorch's Module::load would otherwise
// move each parameter to the device the file names (set_data).
CheckpointContents read_checkpoint(const std::filesystem::path& file, at::Device device = at::kCPU);

// A module's archive (Module::save nests one per child) as dotted names, in the order it
// was written: own parameters, own buffers, then children — PyTorch's state_dict order.
NamedTensors flatten_archive(torch::serialize::InputArchive& archive);

// Whether a run directory has a checkpoint to resume from (`interrupted`, `last` or an
// `epoch-NNNN`).
bool has_checkpoint(const std::filesystem::path& run);

// `path` may be a checkpoint file, a run's checkpoints/ directory, or a run directory;
// returns the checkpoint file meant: in a directory the one that got furthest by its header
// among `interrupted`, `last` and the epoch-NNNN files. The error names `key_path` (the
// recipe key or command-line argument the path came from) and `where` it was written.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path,
                                         const std::string& key_path = "trainer.resume",
                                         const SourceLocation& where = {});

// The checkpoint the best_checkpoint callback ranks first: `best` in a run directory's
// checkpoints/ (or in the checkpoints/ directory named). A recipe error naming `key_path`
// when there is none.
std::filesystem::path resolve_best_checkpoint(const std::filesystem::path& path,
                                              const std::string& key_path = "checkpoint");

}  // namespace mixt
