// The one channel for warnings: each is written as "mixt: warning: MESSAGE" on stderr and,
// while a run directory is open, in its log.txt. Safe to call from loader threads.
#pragma once

#include <functional>
#include <string>

#include "mixt/error.h"  // warn(), the channel's public half

namespace mixt {

// While alive, warnings also go to `log` (the trainer points it at log.txt). A warning
// raised while writing one (log.txt itself failing) goes to stderr only. `echo` false: to
// `log` alone (mixt diagnose's trial runs, whose findings are its report).
class WarningLog {
 public:
  explicit WarningLog(std::function<void(const std::string&)> log, bool echo = true);
  ~WarningLog();
  WarningLog(const WarningLog&) = delete;
  WarningLog& operator=(const WarningLog&) = delete;
};

}  // namespace mixt
