// An append-only TensorBoard event file: TFRecord framing (length, masked CRC-32C of the
// length, the serialized Event, masked CRC-32C of it) around tensorboard.Event messages.
// Records reach the file whole or not at all: a flush that does not fit (a full disk) is cut
// back to the last whole record, so the records flushed once there is room again read on.
//
// This header is the only one the callback (built with LibTorch's include path) sees:
// LibTorch's wheel ships an older protobuf's headers under torch/include, so the protobuf
// code lives behind it in a library compiled with Debian's headers only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace mixt::tensorboard {

// The CRC-32C of `data` as TFRecord stores it: rotated right by 15 and offset, so a CRC
// over bytes that embed CRCs stays well distributed.
std::uint32_t masked_crc32c(const void* data, std::size_t size);

class EventFile {
 public:
  // Creates `events.out.tfevents.<seconds>.<host>.<pid>.<n>` in `directory` (TensorBoard
  // reads every such file of a directory in name order) and writes its version record.
  explicit EventFile(const std::filesystem::path& directory);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  void add_scalar(const std::string& tag, std::int64_t step, double value);
  // A histogram of `values` in equal-width buckets between their minimum and maximum.
  void add_histogram(const std::string& tag, std::int64_t step, const std::vector<double>& values);
  // Markdown text, shown by TensorBoard's text dashboard.
  void add_text(const std::string& tag, std::int64_t step, const std::string& markdown);
  // Writes the records added since the last flush. False when they did not fit (a full
  // disk): they are dropped, and the file ends at the last whole record.
  bool flush();

  const std::filesystem::path& path() const { return path_; }
  // Whether any flush so far (also one made because the records grew large) did not fit.
  bool lost_records() const { return lost_records_; }

 private:
  void add_record(const std::string& serialized_event);

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t written_ = 0;  // bytes of whole records in the file
  std::string pending_;        // records not yet flushed
  bool lost_records_ = false;
};

}  // namespace mixt::tensorboard
