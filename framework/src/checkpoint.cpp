#include "checkpoint.h"

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "atomic_file.h"
#include "first_line.h"
#include "mixt/error.h"

namespace mixt {

namespace fs = std::filesystem;

void write_checkpoint(const fs::path& file, const nlohmann::json& header,
                      torch::serialize::OutputArchive& archive) {
  write_file_atomically(file, [&](std::ostream& out) {
    const std::string header_text = header.dump();
    const std::uint32_t format = kCheckpointFormat;
    const std::uint64_t header_size = header_text.size();
    out.write(kCheckpointMagic, sizeof(kCheckpointMagic));
    out.write(reinterpret_cast<const char*>(&format), sizeof(format));
    out.write(reinterpret_cast<const char*>(&header_size), sizeof(header_size));
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    // Through a writer that never reports failure: LibTorch's zip writer throws from its
    // destructor when the stream fails (a full disk), which is std::terminate mid-unwind.
    // The stream's state says afterwards whether everything was written.
    archive.save_to([&out](const void* data, std::size_t size) {
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
      return size;
    });
  });
}

CheckpointContents read_checkpoint(const fs::path& file, at::Device device) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw runtime_error("cannot read checkpoint " + file.string());
  char magic[sizeof(kCheckpointMagic)] = {};
  std::uint32_t format = 0;
  std::uint64_t header_size = 0;
  in.read(magic, sizeof(magic));
  if (!in || std::memcmp(magic, kCheckpointMagic, sizeof(magic)) != 0) {
    throw Error(ErrorKind::recipe, "not a mixt checkpoint (bad magic number)", SourceLocation{file.string()});
  }
  in.read(reinterpret_cast<char*>(&format), sizeof(format));
  in.read(reinterpret_cast<char*>(&header_size), sizeof(header_size));
  if (!in || format != kCheckpointFormat) {
    throw Error(ErrorKind::recipe,
                "checkpoint format " + std::to_string(format) + ", this mixt reads format " +
                    std::to_string(kCheckpointFormat),
                SourceLocation{file.string()});
  }
  if (header_size > (1u << 26)) {
    throw Error(ErrorKind::recipe, "damaged checkpoint (header too large)", SourceLocation{file.string()});
  }
  std::string header_text(header_size, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_size));
  CheckpointContents contents;
  try {
    contents.header = nlohmann::json::parse(header_text);
    std::stringstream rest;
    rest << in.rdbuf();
    contents.archive.load_from(rest, device);
  } catch (const std::exception& e) {
    // LibTorch's message, first line only (no C++ backtrace): what exactly is damaged.
    throw Error(ErrorKind::recipe, "damaged checkpoint (cannot parse its contents: " + first_line(e.what()) + ")",
                SourceLocation{file.string()});
  }
  return contents;
}

namespace {
void flatten(torch::serialize::InputArchive& archive, const std::string& prefix, NamedTensors& out) {
  for (const std::string& key : archive.keys()) {
    at::Tensor tensor;
    torch::serialize::InputArchive child;
    if (archive.try_read(key, tensor)) {
      out.emplace_back(prefix + key, tensor);
    } else if (archive.try_read(key, child)) {
      flatten(child, prefix + key + ".", out);
    }
  }
}
}  // namespace

NamedTensors flatten_archive(torch::serialize::InputArchive& archive) {
  NamedTensors out;
  flatten(archive, "", out);
  return out;
}

bool has_checkpoint(const fs::path& run) {
  std::error_code ec;
  return fs::exists(run / "checkpoints" / "interrupted", ec) || fs::exists(run / "checkpoints" / "last", ec);
}

namespace {
// The newest run directory (their names are timestamps) at most two levels below `path`
// with a checkpoint: what someone who named an output or experiment directory meant.
std::optional<fs::path> newest_run_below(const fs::path& path) {
  std::optional<fs::path> newest;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it.depth() >= 1) it.disable_recursion_pending();
    if (it->is_symlink(ec) || !it->is_directory(ec) || !has_checkpoint(it->path())) continue;
    if (!newest || it->path().filename() > newest->filename()) newest = it->path();
  }
  return newest;
}
}  // namespace

fs::path resolve_checkpoint(const fs::path& path, const std::string& key_path, const SourceLocation& where) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  // `interrupted` is newer than `last` whenever it exists: each epoch's checkpoint removes it.
  for (const fs::path& directory : {path, path / "checkpoints"}) {
    for (const char* name : {"interrupted", "last"}) {
      if (fs::exists(directory / name, ec)) return fs::canonical(directory / name, ec);
    }
  }
  std::string hint = "name a checkpoint file, a run directory or its checkpoints/ directory";
  if (const std::optional<fs::path> run = newest_run_below(path)) {
    hint = "did you mean " + run->string() + "? (the newest run below it with a checkpoint)";
  }
  if (!where.known()) {
    throw Error(ErrorKind::recipe, "no checkpoint found", SourceLocation{path.string()}, key_path, hint);
  }
  throw Error(ErrorKind::recipe, "no checkpoint found in '" + path.string() + "'", where, key_path, hint);
}

}  // namespace mixt
