#include "token_file.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "mapped_file.h"

namespace tokens {

namespace {

constexpr std::int32_t kLlmcMagic = 20240520;        // uint16 tokens, version 1
constexpr std::int32_t kLlmcLlama3Magic = 20240801;  // uint32 tokens, version 7
constexpr std::int64_t kLlmcHeaderBytes = 256 * 4;

std::int32_t header_int(const MappedFile& map, std::size_t index) {
  std::int32_t value = 0;
  std::memcpy(&value, map.data() + 4 * index, 4);
  return value;
}

bool starts_with_magic(const MappedFile& map) {
  return map.size() >= 4 && (header_int(map, 0) == kLlmcMagic || header_int(map, 0) == kLlmcLlama3Magic);
}

// The width of the ids after the llm.c header, from its magic and version.
int llmc_width(const std::string& path, const MappedFile& map) {
  const std::int32_t magic = header_int(map, 0);
  const std::int32_t version = header_int(map, 1);
  if (magic == kLlmcMagic) {
    if (version != 1) {
      throw TokenFileError(path + ": llm.c header version " + std::to_string(version) +
                           " with magic 20240520; that magic goes with version 1 (uint16 tokens)");
    }
    return 2;
  }
  if (magic == kLlmcLlama3Magic) {
    if (version != 7) {
      throw TokenFileError(path + ": llm.c header version " + std::to_string(version) +
                           " with magic 20240801; that magic goes with version 7 (uint32 tokens)");
    }
    return 4;
  }
  throw TokenFileError(path + " is not an llm.c token file: its first int32 is " + std::to_string(magic) +
                       ", llm.c's magics are 20240520 (uint16 tokens) and 20240801 (uint32)");
}

// The count of ids after the llm.c header, checked against the header and the file size.
std::int64_t llmc_token_count(const std::string& path, const MappedFile& map, int width) {
  const auto size = static_cast<std::int64_t>(map.size());
  const std::int64_t promised = header_int(map, 2);
  const std::int64_t payload = size - kLlmcHeaderBytes;
  if (promised < 0 || payload != width * promised) {
    throw TokenFileError(path + ": the llm.c header says " + std::to_string(promised) + " tokens, the file holds " +
                         std::to_string(payload / width) + (payload % width ? " and a part" : "") + " (" +
                         std::to_string(payload) + " bytes after the 1024-byte header, " + std::to_string(width) +
                         " per token)");
  }
  return promised;
}

}  // namespace

TokenFile open_token_file(const std::string& path, TokenFormat format) {
  auto map = std::make_shared<const MappedFile>(path);
  TokenFile file;
  file.format = format == TokenFormat::auto_detect
                    ? (starts_with_magic(*map) ? TokenFormat::llmc : TokenFormat::nanogpt)
                    : format;
  TokenRun& run = file.run;
  run.file = path;
  run.width = 2;
  if (file.format == TokenFormat::llmc) {
    if (static_cast<std::int64_t>(map->size()) < kLlmcHeaderBytes) {
      throw TokenFileError(path + " holds " + std::to_string(map->size()) +
                           " bytes, less than llm.c's 1024-byte header");
    }
    run.width = llmc_width(path, *map);
    run.count = llmc_token_count(path, *map, run.width);
    run.header_bytes = kLlmcHeaderBytes;
  } else {
    if (map->size() % 2 != 0) {
      throw TokenFileError(path + ": a nanoGPT file holds uint16 ids, but its size, " + std::to_string(map->size()) +
                           " bytes, is not a multiple of 2");
    }
    run.count = static_cast<std::int64_t>(map->size() / 2);
  }
  run.bytes = map->data() == nullptr ? nullptr : map->data() + run.header_bytes;
  run.owner = std::move(map);
  return file;
}

}  // namespace tokens
