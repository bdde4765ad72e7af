#include "event_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/crc.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tensorboard_events.pb.h"

namespace mixt::tensorboard {
namespace {

// CRC-32C (Castagnoli): polynomial 0x1EDC6F41, reflected, initial and final XOR all ones.
using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

double wall_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// The upstream name (tensorboard/summary/writer/event_file_writer.py): one file per writer,
// distinct within a process by the counter.
std::filesystem::path new_file_name(const std::filesystem::path& directory, int attempt) {
  static std::atomic<int> counter{0};
  const auto seconds = static_cast<long long>(wall_time());
  char suffix[64];
  std::snprintf(suffix, sizeof(suffix), ".%lld.", seconds);
  return directory / ("events.out.tfevents" + std::string(suffix) + host_name() + "." + std::to_string(getpid()) +
                      "." + std::to_string(counter++ + attempt));
}

void put_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}
void put_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

::tensorboard::Event event_at(std::int64_t step) {
  ::tensorboard::Event event;
  event.set_wall_time(wall_time());
  event.set_step(step);
  return event;
}

}  // namespace

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  Crc32c crc;
  crc.process_bytes(data, size);
  const std::uint32_t value = crc.checksum();
  return ((value >> 15) | (value << 17)) + 0xa282ead8u;
}

EventFile::EventFile(const std::filesystem::path& directory) {
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    path_ = new_file_name(directory, attempt);
    // Never an existing file: a resumed run adds its own.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) throw std::runtime_error("cannot create " + path_.string() + ": " + std::strerror(errno));
  ::tensorboard::Event version = event_at(0);
  version.set_file_version("brain.Event:2");
  add_record(version.SerializeAsString());
}

EventFile::~EventFile() {
  if (fd_ >= 0) ::close(fd_);
}

void EventFile::add_record(const std::string& serialized_event) {
  const std::size_t start = pending_.size();
  put_u64(pending_, serialized_event.size());
  put_u32(pending_, masked_crc32c(pending_.data() + start, 8));
  pending_ += serialized_event;
  put_u32(pending_, masked_crc32c(serialized_event.data(), serialized_event.size()));
  if (pending_.size() > (std::size_t{1} << 20)) flush();  // a long epoch's records stay bounded in memory
}

void EventFile::add_scalar(const std::string& tag, std::int64_t step, double value) {
  ::tensorboard::Event event = event_at(step);
  ::tensorboard::Summary::Value* summary = event.mutable_summary()->add_value();
  summary->set_tag(tag);
  summary->set_simple_value(static_cast<float>(value));
  add_record(event.SerializeAsString());
}

void EventFile::add_histogram(const std::string& tag, std::int64_t step, const std::vector<double>& values) {
  if (values.empty()) return;
  constexpr int kBuckets = 30;
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  ::tensorboard::Event event = event_at(step);
  ::tensorboard::Summary::Value* summary = event.mutable_summary()->add_value();
  summary->set_tag(tag);
  ::tensorboard::HistogramProto* histogram = summary->mutable_histo();
  histogram->set_min(*low);
  histogram->set_max(*high);
  histogram->set_num(static_cast<double>(values.size()));
  double sum = 0, squares = 0;
  for (double v : values) {
    sum += v;
    squares += v * v;
  }
  histogram->set_sum(sum);
  histogram->set_sum_squares(squares);
  // Bucket i holds (limit[i-1], limit[i]]; one bucket when every value is the same.
  const int buckets = *high > *low ? kBuckets : 1;
  std::vector<double> counts(static_cast<std::size_t>(buckets), 0.0);
  const double width = (*high - *low) / buckets;
  for (double v : values) {
    int i = width > 0 ? static_cast<int>(std::ceil((v - *low) / width)) - 1 : 0;
    counts[static_cast<std::size_t>(std::clamp(i, 0, buckets - 1))] += 1;
  }
  for (int i = 0; i < buckets; ++i) {
    histogram->add_bucket_limit(i + 1 == buckets ? *high : *low + width * (i + 1));
    histogram->add_bucket(counts[static_cast<std::size_t>(i)]);
  }
  add_record(event.SerializeAsString());
}

void EventFile::add_text(const std::string& tag, std::int64_t step, const std::string& markdown) {
  ::tensorboard::Event event = event_at(step);
  ::tensorboard::Summary::Value* summary = event.mutable_summary()->add_value();
  summary->set_tag(tag);
  summary->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  ::tensorboard::TensorProto* tensor = summary->mutable_tensor();
  tensor->set_dtype(::tensorboard::DT_STRING);
  tensor->mutable_tensor_shape()->add_dim()->set_size(1);
  tensor->add_string_val(markdown);
  add_record(event.SerializeAsString());
}

bool EventFile::flush() {
  std::size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n = ::pwrite(fd_, pending_.data() + done, pending_.size() - done, static_cast<off_t>(written_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const bool whole = done == pending_.size();
  if (whole) {
    written_ += done;
  } else if (::ftruncate(fd_, static_cast<off_t>(written_)) != 0) {
    // The cut failed too: what follows goes after the fragment, which readers stop at.
    struct stat status{};
    if (::fstat(fd_, &status) == 0) written_ = static_cast<std::uint64_t>(status.st_size);
  }
  pending_.clear();
  lost_records_ = lost_records_ || !whole;
  return whole;
}

}  // namespace mixt::tensorboard
