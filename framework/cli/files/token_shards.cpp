#include "files/token_shards.h"

#include <mixt/error.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/atomic_file.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::int32_t kUint16Magic = 20240520;
constexpr std::int32_t kUint32Magic = 20240801;

std::string shard_name(const std::string& split, std::size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "%s_%06zu.bin", split.c_str(), index);
  return name;
}

// Copies `count` uint32 ids from `in` to `out` at `width` bytes each (little-endian).
void copy_ids(std::ifstream& in, std::ostream& out, std::int64_t count, int width) {
  std::vector<std::uint32_t> ids(1 << 16);
  std::vector<std::uint16_t> narrow(ids.size());
  while (count > 0) {
    const auto take = static_cast<std::size_t>(std::min<std::int64_t>(count, static_cast<std::int64_t>(ids.size())));
    if (!in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(4 * take))) {
      throw runtime_error("the token spool ended early");
    }
    if (width == 4) {
      out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(4 * take));
    } else {
      for (std::size_t i = 0; i < take; ++i) narrow[i] = static_cast<std::uint16_t>(ids[i]);
      out.write(reinterpret_cast<const char*>(narrow.data()), static_cast<std::streamsize>(2 * take));
    }
    count -= static_cast<std::int64_t>(take);
  }
}

void write_shard(std::ifstream& in, const fs::path& file, std::int64_t count, int width) {
  write_file_atomically(file, [&](std::ostream& out) {
    std::array<std::int32_t, 256> header{};
    header[0] = width == 4 ? kUint32Magic : kUint16Magic;
    header[1] = width == 4 ? 7 : 1;
    header[2] = static_cast<std::int32_t>(count);
    out.write(reinterpret_cast<const char*>(header.data()), sizeof header);
    copy_ids(in, out, count, width);
  });
}

}  // namespace

TokenSpool::TokenSpool(fs::path file) : file_(std::move(file)), out_(file_, std::ios::binary | std::ios::trunc) {
  if (!out_) throw runtime_error("cannot write " + file_.string() + ": " + std::strerror(errno));
}

TokenSpool::~TokenSpool() {
  out_.close();
  std::error_code ec;
  fs::remove(file_, ec);
}

void TokenSpool::append(std::span<const TokenId> ids) {
  static_assert(sizeof(TokenId) == 4);
  out_.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(4 * ids.size()));
  if (!out_) {
    throw runtime_error("cannot write " + file_.string() + " (" + std::strerror(errno) + ")",
                        storage_hint(errno, file_.parent_path()));
  }
  count_ += static_cast<std::int64_t>(ids.size());
}

void TokenSpool::close_for_reading() {
  out_.close();
  if (!out_) throw runtime_error("cannot write " + file_.string(), storage_hint(errno, file_.parent_path()));
}

WrittenShards write_llmc_shards(TokenSpool& spool, const fs::path& directory, int width, std::int64_t shard_tokens,
                                std::int64_t val_tokens) {
  spool.close_for_reading();
  std::ifstream in(spool.file(), std::ios::binary);
  WrittenShards written;
  const auto write_split = [&](const std::string& split, std::int64_t tokens, std::vector<fs::path>& files) {
    while (tokens > 0) {
      const std::int64_t take = std::min(tokens, shard_tokens);
      files.push_back(directory / shard_name(split, files.size()));
      write_shard(in, files.back(), take, width);
      tokens -= take;
    }
  };
  write_split("train", spool.count() - val_tokens, written.train);
  write_split("val", val_tokens, written.val);
  return written;
}

}  // namespace mixt::cli
