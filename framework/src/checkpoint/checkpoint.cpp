#include "checkpoint/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "checkpoint/zip_entries.h"
#include "common/atomic_file.h"
#include "common/first_line.h"
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
    std::uint64_t archive_size = 0;
    std::uint32_t crc = static_cast<std::uint32_t>(crc32_z(0, nullptr, 0));
    archive.save_to([&](const void* data, std::size_t size) {
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
      crc = static_cast<std::uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), size));
      archive_size += size;
      return size;
    });
    out.write(reinterpret_cast<const char*>(&archive_size), sizeof(archive_size));
    out.write(reinterpret_cast<const char*>(&crc), sizeof(crc));
    out.write(kCheckpointEnd, sizeof(kCheckpointEnd));
  });
}

namespace {
constexpr std::size_t kTrailerSize = sizeof(std::uint64_t) + sizeof(std::uint32_t) + sizeof(kCheckpointEnd);

Error damaged(const fs::path& file, const std::string& what) {
  return Error(ErrorKind::recipe, "damaged checkpoint (" + what + ")", SourceLocation{file.string()}, {},
               "resume from another checkpoint of the run (checkpoints/epoch-NNNN)");
}

// Format 2: the archive's size, after its trailer and CRC-32 are checked against the bytes
// from `offset` (where the archive starts) to the end of the file (`file_size` bytes), which
// are read in pieces: nothing of the file is held whole.
std::uint64_t checked_archive_size(const fs::path& file, std::ifstream& in, std::uint64_t offset,
                                   std::uint64_t file_size) {
  if (file_size < offset + kTrailerSize) throw damaged(file, "cut short: it does not end with its end marker");
  char trailer[kTrailerSize];
  in.seekg(static_cast<std::streamoff>(file_size - kTrailerSize));
  in.read(trailer, sizeof(trailer));
  if (!in ||
      std::memcmp(trailer + kTrailerSize - sizeof(kCheckpointEnd), kCheckpointEnd, sizeof(kCheckpointEnd)) != 0) {
    throw damaged(file, "cut short: it does not end with its end marker");
  }
  std::uint64_t archive_size = 0;
  std::uint32_t crc = 0;
  std::memcpy(&archive_size, trailer, sizeof(archive_size));
  std::memcpy(&crc, trailer + sizeof(archive_size), sizeof(crc));
  const std::uint64_t present = file_size - offset - kTrailerSize;
  if (archive_size != present) {
    throw damaged(file, "its contents are " + std::to_string(present) + " bytes, " + std::to_string(archive_size) +
                            " were written");
  }
  auto computed = static_cast<std::uint32_t>(crc32_z(0, nullptr, 0));
  std::vector<char> piece(std::size_t{1} << 20);
  in.seekg(static_cast<std::streamoff>(offset));
  for (std::uint64_t left = archive_size; left > 0;) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, piece.size()));
    in.read(piece.data(), static_cast<std::streamsize>(n));
    if (!in) throw damaged(file, "cut short while reading its contents");
    computed = static_cast<std::uint32_t>(crc32_z(computed, reinterpret_cast<const Bytef*>(piece.data()), n));
    left -= n;
  }
  if (computed != crc) throw damaged(file, "its bytes do not match the CRC-32 written with them");
  return archive_size;
}

// LibTorch's archive read straight from the file's bytes [offset, offset + size), as the
// archive asks for them: a checkpoint costs the memory of its tensors, not twice that.
void load_archive(const fs::path& file, std::uint64_t offset, std::uint64_t size, at::Device device,
                  torch::serialize::InputArchive& archive) {
  auto in = std::make_shared<std::ifstream>(file, std::ios::binary);
  if (!*in) throw runtime_error("cannot read checkpoint " + file.string());
  archive.load_from(
      [in, offset, size](std::uint64_t position, void* buffer, std::size_t n) -> std::size_t {
        if (position >= size) return 0;
        n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - position));
        in->clear();
        in->seekg(static_cast<std::streamoff>(offset + position));
        in->read(static_cast<char*>(buffer), static_cast<std::streamsize>(n));
        return static_cast<std::size_t>(in->gcount());
      },
      [size] { return static_cast<std::size_t>(size); }, device);
}
}  // namespace

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
  if (!in) throw damaged(file, "cut short in its header");
  if (format < 1 || format > kCheckpointFormat) {
    throw Error(ErrorKind::recipe,
                "checkpoint format " + std::to_string(format) + ", this mixt reads formats 1 to " +
                    std::to_string(kCheckpointFormat),
                SourceLocation{file.string()}, {}, "a newer mixt wrote it: resume it with that one");
  }
  if (header_size > (1u << 26)) throw damaged(file, "header too large");
  std::string header_text(header_size, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_size));
  if (!in) throw damaged(file, "cut short in its header");
  const auto offset = static_cast<std::uint64_t>(in.tellg());
  std::error_code ec;
  const std::uint64_t file_size = fs::file_size(file, ec);
  if (ec) throw runtime_error("cannot read checkpoint " + file.string() + ": " + ec.message());
  const std::uint64_t archive_size =
      format >= 2 ? checked_archive_size(file, in, offset, file_size) : file_size - offset;
  // Format 1 has no CRC of its own: the zip's, entry by entry, before LibTorch trusts a size.
  if (format == 1) {
    if (const std::optional<std::string> damage = zip_archive_damage(in, offset, archive_size)) {
      throw damaged(file, *damage);
    }
  }
  CheckpointContents contents;
  try {
    contents.header = nlohmann::json::parse(header_text);
  } catch (const std::exception& e) {
    throw damaged(file, std::string("its header is not JSON: ") + first_line(e.what()));
  }
  // What resume() reads from it: an object, with a list of components.
  const auto components = contents.header.find("components");
  if (!contents.header.is_object() || (components != contents.header.end() && !components->is_array())) {
    throw damaged(file, "its header is not the JSON object mixt writes");
  }
  for (const auto& component : contents.header.value("components", nlohmann::json::array())) {
    if (!component.is_object()) throw damaged(file, "its header is not the JSON object mixt writes");
  }
  try {
    load_archive(file, offset, archive_size, device, contents.archive);
  } catch (const std::exception& e) {
    // LibTorch's message, first line only (no C++ backtrace): what exactly is damaged.
    throw damaged(file, "cannot parse its contents: " + first_line(e.what()));
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

namespace {
// How far a checkpoint got, from its header alone: (epoch, batches into it). Empty when the
// file is not a checkpoint whose header reads.
std::optional<std::pair<std::int64_t, std::int64_t>> progress_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[sizeof(kCheckpointMagic)] = {};
  std::uint32_t format = 0;
  std::uint64_t header_size = 0;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&format), sizeof(format));
  in.read(reinterpret_cast<char*>(&header_size), sizeof(header_size));
  if (!in || std::memcmp(magic, kCheckpointMagic, sizeof(magic)) != 0 || header_size > (1u << 26)) return {};
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  if (!in) return {};
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object() || !header.contains("epoch") || !header["epoch"].is_number_integer()) return {};
  // value() would throw nlohmann's type_error at a batches_in_epoch of another type.
  const auto batches = header.find("batches_in_epoch");
  return std::make_pair(header["epoch"].get<std::int64_t>(),
                        batches != header.end() && batches->is_number_integer() ? batches->get<std::int64_t>() : 0);
}

// The newest checkpoint in a checkpoints/ directory, by how far each got (its header): the
// files are renamed into place only once complete, but `last` is re-pointed after the new
// epoch's file is in place and `interrupted` removed after that, so a crash in between
// leaves either one behind the newest. On a tie `interrupted` wins, then what `last` names.
std::optional<fs::path> newest_in(const fs::path& directory) {
  std::error_code ec;
  std::vector<fs::path> candidates;
  for (const char* name : {"interrupted", "last"}) {
    if (fs::is_regular_file(directory / name, ec)) candidates.push_back(fs::canonical(directory / name, ec));
  }
  for (auto it = fs::directory_iterator(directory, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("epoch-", 0) != 0 || name.find_first_not_of("0123456789", 6) != std::string::npos ||
        name.size() == 6 || name.size() > 6 + 18 || !it->is_regular_file(ec)) {
      continue;  // epoch-0003.tmp: a write that never finished
    }
    candidates.push_back(it->path());
  }
  std::optional<fs::path> newest;
  std::pair<std::int64_t, std::int64_t> newest_progress{-1, -1};  // below any header's
  for (const fs::path& candidate : candidates) {
    const auto progress = progress_of(candidate);
    if (!newest || (progress && *progress > newest_progress)) {
      newest = candidate;
      if (progress) newest_progress = *progress;
    }
  }
  return newest;
}
}  // namespace

bool has_checkpoint(const fs::path& run) { return newest_in(run / "checkpoints").has_value(); }

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
  for (const fs::path& directory : {path, path / "checkpoints"}) {
    if (const std::optional<fs::path> newest = newest_in(directory)) return *newest;
  }
  std::string hint = "name a checkpoint file, a run directory or its checkpoints/ directory";
  if (const std::optional<fs::path> run = newest_run_below(path)) {
    hint = "did you mean " + run->string() + "? (the newest run below it with a checkpoint)";
  }
  if (!where.known()) {
    throw Error(ErrorKind::recipe, "no checkpoint found", SourceLocation{path.string()}, key_path, hint);
  }
  const std::string what = fs::exists(path, ec) ? "no checkpoint found in '" + path.string() + "'"
                                                 : "'" + path.string() + "' does not exist";
  throw Error(ErrorKind::recipe, what, where, key_path, hint);
}

fs::path resolve_best_checkpoint(const fs::path& path, const std::string& key_path) {
  std::error_code ec;
  for (const fs::path& link : {path / "checkpoints" / "best", path / "best"}) {
    if (fs::is_regular_file(link, ec)) return fs::canonical(link, ec);
  }
  throw Error(ErrorKind::recipe, "no best checkpoint in '" + path.string() + "'", SourceLocation{}, key_path,
              fs::is_regular_file(path, ec)
                  ? "--best takes a run directory (or its checkpoints/): name the file without --best"
                  : "the run needs the best_checkpoint callback (callbacks: [{name: best_checkpoint, monitor: "
                    "val_loss}]), which keeps checkpoints/best; without --best the newest checkpoint is read");
}

}  // namespace mixt
