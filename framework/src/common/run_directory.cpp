#include "common/run_directory.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/atomic_file.h"
#include "mixt/error.h"
#include "common/interrupt.h"
#include "common/warnings.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {
// Why a stream that was given `errno = 0` before its writes failed: iostreams keep no
// reason of their own, the failed write() left it in errno.
std::string stream_failure() { return errno != 0 ? std::strerror(errno) : "write failed"; }
}  // namespace

RunDirectory::RunDirectory(const fs::path& output, const std::string& name) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &local);
  const fs::path parent = output / name;
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw runtime_error("cannot create run directory " + parent.string() + ": " + ec.message());
  path_ = parent / stamp;
  for (int suffix = 1; !fs::create_directory(path_, ec); ++suffix) {
    if (ec) throw runtime_error("cannot create run directory " + path_.string() + ": " + ec.message());
    if (interrupt_requested()) throw Error(ErrorKind::interrupted, "interrupted before training started");
    if (suffix > 1000) {
      throw runtime_error("cannot create a new run directory in " + parent.string() + ": " + path_.filename().string() +
                          " and 1000 more names are taken");
    }
    path_ = parent / (std::string(stamp) + "-" + std::to_string(suffix));
  }
  metrics_.open(path_ / "metrics.jsonl", /*fresh=*/true);
  log_.open(path_ / "log.txt", /*fresh=*/true);
}

RunDirectory::RunDirectory(const fs::path& existing, Reopen) : path_(existing) {
  if (!fs::is_directory(path_)) throw runtime_error("run directory to continue does not exist: " + path_.string());
  remove_stale_temporaries(path_);  // what the process before this one was writing when it died
  remove_stale_temporaries(checkpoints());
  metrics_.open(path_ / "metrics.jsonl", /*fresh=*/false);
  log_.open(path_ / "log.txt", /*fresh=*/false);
}

void RunDirectory::write_text(const std::string& file, const std::string& text) const {
  errno = 0;
  std::ofstream out(path_ / file);
  out << text;
  out.close();  // the text is in the stream's buffer until then: a full disk shows here
  if (!out) throw runtime_error("cannot write " + (path_ / file).string() + ": " + stream_failure());
}

void RunDirectory::append_metrics(const nlohmann::json& line) {
  std::lock_guard<std::recursive_mutex> lock(metrics_mutex_);
  append_line(metrics_, line.dump(), "metrics.jsonl", metrics_warned_);
}

void RunDirectory::append_log(const std::string& line) {
  std::lock_guard<std::recursive_mutex> lock(log_mutex_);
  append_line(log_, line, "log.txt", log_warned_);
}

// A metrics or log line is worth a warning, not the run: the checkpoints matter more, and
// their writer fails loudly when the disk is truly full. Said once per file; a line goes
// in whole or not at all, so that later lines are whole again once there is room.
void RunDirectory::append_line(AppendFile& out, const std::string& line, const char* file, bool& warned) {
  errno = 0;
  if (out.append(line)) return;
  const std::string why = stream_failure();
  if (!warned) {
    warn("cannot append to " + (path_ / file).string() + " (" + why + "): lines are missing from it");
  }
  warned = true;
}

}  // namespace mixt
