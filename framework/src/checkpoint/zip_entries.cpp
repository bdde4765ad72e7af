#include "checkpoint/zip_entries.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace mixt {

namespace {

// Signatures, as the bytes "PK" and two more, read little-endian.
constexpr std::uint32_t kEndOfDirectory = 0x06054b50, kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr std::uint32_t kDirectoryEntry = 0x02014b50, kLocalHeader = 0x04034b50;
constexpr std::size_t kEndSize = 22, kLocatorSize = 20, kZip64EndSize = 56, kEntrySize = 46, kLocalSize = 30;

std::uint64_t little(const char* at, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(at[i]);
  return value;
}

class Archive {
 public:
  Archive(std::istream& in, std::uint64_t offset, std::uint64_t size) : in_(in), offset_(offset), size_(size) {}
  std::uint64_t size() const { return size_; }
  // `n` bytes at `position` in the archive, or false when they are not all inside it.
  bool read(std::uint64_t position, std::size_t n, std::vector<char>& out) {
    if (position > size_ || n > size_ - position) return false;
    out.resize(n);
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset_ + position));
    in_.read(out.data(), static_cast<std::streamsize>(n));
    return static_cast<std::size_t>(in_.gcount()) == n;
  }
  // The CRC-32 of [position, position + n), read in pieces.
  std::optional<std::uint32_t> crc(std::uint64_t position, std::uint64_t n) {
    auto value = static_cast<std::uint32_t>(crc32_z(0, nullptr, 0));
    std::vector<char> piece;
    for (std::uint64_t done = 0; done < n;) {
      const auto part = static_cast<std::size_t>(std::min<std::uint64_t>(n - done, std::uint64_t{1} << 20));
      if (!read(position + done, part, piece)) return std::nullopt;
      value = static_cast<std::uint32_t>(crc32_z(value, reinterpret_cast<const Bytef*>(piece.data()), part));
      done += part;
    }
    return value;
  }

  // The CRC-32 of the raw deflate stream at [position, position + n) inflated, which must
  // come to exactly `expected` bytes; nothing when it does not, or does not inflate.
  std::optional<std::uint32_t> inflated_crc(std::uint64_t position, std::uint64_t n, std::uint64_t expected) {
    z_stream stream{};
    if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) return std::nullopt;
    struct End {
      z_stream* s;
      ~End() { inflateEnd(s); }
    } end{&stream};
    auto value = static_cast<std::uint32_t>(crc32_z(0, nullptr, 0));
    std::vector<char> piece, out(std::size_t{1} << 20);
    std::uint64_t done = 0, produced = 0;
    int status = Z_OK;
    while (status != Z_STREAM_END) {
      if (stream.avail_in == 0) {
        const auto part = static_cast<std::size_t>(std::min<std::uint64_t>(n - done, std::uint64_t{1} << 20));
        if (part == 0 || !read(position + done, part, piece)) return std::nullopt;
        done += part;
        stream.next_in = reinterpret_cast<Bytef*>(piece.data());
        stream.avail_in = static_cast<uInt>(part);
      }
      stream.next_out = reinterpret_cast<Bytef*>(out.data());
      stream.avail_out = static_cast<uInt>(out.size());
      status = inflate(&stream, Z_NO_FLUSH);
      if (status != Z_OK && status != Z_STREAM_END) return std::nullopt;
      const std::size_t made = out.size() - stream.avail_out;
      produced += made;
      if (produced > expected) return std::nullopt;  // stop a bomb early
      value = static_cast<std::uint32_t>(crc32_z(value, reinterpret_cast<const Bytef*>(out.data()), made));
    }
    if (produced != expected) return std::nullopt;
    return value;
  }

 private:
  std::istream& in_;
  std::uint64_t offset_, size_;
};

struct Directory {
  std::uint64_t entries = 0, offset = 0, size = 0;
};

// The end-of-central-directory record, the last in the archive (a comment may follow it),
// and its zip64 form when a count or place does not fit the classic one.
std::optional<Directory> find_directory(Archive& archive, std::string& why) {
  const std::uint64_t tail = std::min<std::uint64_t>(archive.size(), kEndSize + 0xFFFF);
  std::vector<char> bytes;
  if (tail < kEndSize || !archive.read(archive.size() - tail, static_cast<std::size_t>(tail), bytes)) {
    why = "too short to be a zip archive";
    return std::nullopt;
  }
  for (std::size_t at = bytes.size() - kEndSize + 1; at-- > 0;) {
    if (little(&bytes[at], 4) != kEndOfDirectory) continue;
    Directory d{little(&bytes[at + 10], 2), little(&bytes[at + 16], 4), little(&bytes[at + 12], 4)};
    if (d.entries == 0xFFFF || d.offset == 0xFFFFFFFF || d.size == 0xFFFFFFFF) {
      const std::uint64_t end = archive.size() - tail + at;
      std::vector<char> locator, record;
      if (end < kLocatorSize || !archive.read(end - kLocatorSize, kLocatorSize, locator) ||
          little(locator.data(), 4) != kZip64Locator || !archive.read(little(&locator[8], 8), kZip64EndSize, record) ||
          little(record.data(), 4) != kZip64End) {
        why = "its zip64 directory record is missing";
        return std::nullopt;
      }
      d = {little(&record[32], 8), little(&record[48], 8), little(&record[40], 8)};
    }
    if (d.offset > archive.size() || d.size > archive.size() - d.offset) {
      why = "its central directory lies outside it";
      return std::nullopt;
    }
    return d;
  }
  why = "it has no end of central directory";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> zip_archive_damage(std::istream& in, std::uint64_t offset, std::uint64_t size) {
  Archive archive(in, offset, size);
  std::string why;
  const std::optional<Directory> directory = find_directory(archive, why);
  if (!directory) return why;
  std::vector<char> listing, local;
  if (!archive.read(directory->offset, static_cast<std::size_t>(directory->size), listing)) {
    return "its central directory cannot be read";
  }
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < directory->entries; ++i) {
    if (listing.size() - at < kEntrySize || little(&listing[at], 4) != kDirectoryEntry) {
      return "its central directory ends before its " + std::to_string(directory->entries) + " entries";
    }
    const char* entry = &listing[at];
    const std::uint64_t method = little(entry + 10, 2), crc = little(entry + 16, 4), name_size = little(entry + 28, 2);
    std::uint64_t compressed = little(entry + 20, 4), stored = little(entry + 24, 4), local_at = little(entry + 42, 4);
    const std::size_t extra_size = little(entry + 30, 2), comment_size = little(entry + 32, 2);
    if (listing.size() - at - kEntrySize < name_size + extra_size + comment_size) {
      return "its central directory ends inside an entry";
    }
    const std::string name(entry + kEntrySize, name_size);
    // A zip64 extra field holds, in this order, each of the three that reads 0xFFFFFFFF above.
    for (std::size_t x = 0; x + 4 <= extra_size;) {
      const char* field = entry + kEntrySize + name_size + x;
      const std::size_t length = little(field + 2, 2);
      if (little(field, 2) == 0x0001) {
        std::size_t next = 4;
        for (std::uint64_t* value : {&stored, &compressed, &local_at}) {
          if (*value != 0xFFFFFFFF) continue;
          if (next + 8 > length + 4 || x + next + 8 > extra_size) return "entry " + name + ": its zip64 sizes are cut";
          *value = little(field + next, 8);
          next += 8;
        }
      }
      x += 4 + length;
    }
    // Stored, or deflated (LibTorch compresses the code it saves beside the tensors).
    if ((method != 0 && method != 8) || (method == 0 && compressed != stored)) {
      return "entry " + name + " is neither stored nor deflated";
    }
    if (!archive.read(local_at, kLocalSize, local) || little(local.data(), 4) != kLocalHeader) {
      return "entry " + name + ": its local header is missing";
    }
    const std::uint64_t data = local_at + kLocalSize + little(&local[26], 2) + little(&local[28], 2);
    if (data > archive.size() || compressed > archive.size() - data) return "entry " + name + " runs past the archive";
    const std::optional<std::uint32_t> computed =
        method == 0 ? archive.crc(data, stored) : archive.inflated_crc(data, compressed, stored);
    if (!computed) return "entry " + name + (method == 0 ? " cannot be read" : " does not inflate to its size");
    if (*computed != crc) return "entry " + name + "'s bytes do not match its CRC-32";
    at += kEntrySize + name_size + extra_size + comment_size;
  }
  return std::nullopt;
}

}  // namespace mixt
