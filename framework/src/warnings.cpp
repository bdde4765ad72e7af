#include "warnings.h"

#include <cstdio>
#include <mutex>

namespace mixt {

namespace {
std::mutex log_mutex;
std::function<void(const std::string&)> log_sink;  // guarded by log_mutex
thread_local bool writing_warning = false;
}  // namespace

void warn(const std::string& message) {
  const std::string line = "mixt: warning: " + message;
  std::fprintf(stderr, "%s\n", line.c_str());
  if (writing_warning) return;
  writing_warning = true;
  {
    std::lock_guard<std::mutex> lock(log_mutex);
    if (log_sink) log_sink(line);
  }
  writing_warning = false;
}

WarningLog::WarningLog(std::function<void(const std::string&)> log) {
  std::lock_guard<std::mutex> lock(log_mutex);
  log_sink = std::move(log);
}

WarningLog::~WarningLog() {
  std::lock_guard<std::mutex> lock(log_mutex);
  log_sink = nullptr;
}

}  // namespace mixt
