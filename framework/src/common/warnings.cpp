#include "common/warnings.h"

#include <cstdio>
#include <mutex>

namespace mixt {

namespace {
std::mutex log_mutex;
std::function<void(const std::string&)> log_sink;  // guarded by log_mutex
bool echo_to_stderr = true;                        // guarded by log_mutex
thread_local bool writing_warning = false;
}  // namespace

void warn(const std::string& message) {
  const std::string line = "mixt: warning: " + message;
  if (writing_warning) {  // raised by the sink itself, which holds log_mutex: stderr alone
    std::fprintf(stderr, "%s\n", line.c_str());
    return;
  }
  writing_warning = true;
  {
    std::lock_guard<std::mutex> lock(log_mutex);
    if (echo_to_stderr) std::fprintf(stderr, "%s\n", line.c_str());
    if (log_sink) log_sink(line);
  }
  writing_warning = false;
}

WarningLog::WarningLog(std::function<void(const std::string&)> log, bool echo) {
  std::lock_guard<std::mutex> lock(log_mutex);
  log_sink = std::move(log);
  echo_to_stderr = echo;
}

WarningLog::~WarningLog() {
  std::lock_guard<std::mutex> lock(log_mutex);
  log_sink = nullptr;
  echo_to_stderr = true;
}

}  // namespace mixt
