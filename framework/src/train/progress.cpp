#include "train/progress.h"

#include <cmath>
#include <cstdio>

namespace mixt {

namespace {
std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto total = static_cast<long>(seconds + 0.5);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof(text), "%ld:%02ld:%02ld", total / 3600, (total / 60) % 60, total % 60);
  } else {
    std::snprintf(text, sizeof(text), "%02ld:%02ld", total / 60, total % 60);
  }
  return text;
}

std::string format_extra(const std::vector<std::pair<std::string, double>>& extra) {
  std::string text;
  char value[64];
  for (const auto& [name, number] : extra) {
    std::snprintf(value, sizeof(value), " %s %g", name.c_str(), number);
    text += value;
  }
  return text;
}
}  // namespace

Progress::Progress(bool terminal, std::int64_t log_every, bool quiet)
    : terminal_(terminal && !quiet), quiet_(quiet), log_every_(log_every) {}

void Progress::start_epoch(std::int64_t epoch, std::int64_t epochs, std::int64_t steps, std::int64_t first_step) {
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps;
  first_step_ = first_step;
  epoch_start_ = Clock::now();
  last_draw_ = Clock::time_point{};
  bar_drawn_ = false;
}

bool Progress::wants(std::int64_t step) const {
  if (quiet_) return false;
  if (!terminal_) return step % log_every_ == 0 || step == steps_;
  const auto now = Clock::now();
  if (step != steps_ && now - last_draw_ < std::chrono::milliseconds(100)) return false;
  last_draw_ = now;
  return true;
}

void Progress::show(std::int64_t step, double loss, double rate, const char* rate_unit,
                    const std::vector<std::pair<std::string, double>>& extra) {
  if (quiet_) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - epoch_start_).count();
  const double steps_per_second = elapsed > 0 ? static_cast<double>(step - first_step_) / elapsed : 0.0;
  const double eta = steps_per_second > 0 ? static_cast<double>(steps_ - step) / steps_per_second : NAN;
  if (terminal_) {
    constexpr int kWidth = 24;
    const int filled = steps_ > 0 ? static_cast<int>(kWidth * step / steps_) : 0;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r\033[Kepoch %lld/%lld [%s] %lld/%lld %.1f step/s %.0f %s/s ETA %s loss %.4f%s",
                 static_cast<long long>(epoch_ + 1), static_cast<long long>(epochs_), bar.c_str(),
                 static_cast<long long>(step), static_cast<long long>(steps_), steps_per_second, rate, rate_unit,
                 format_duration(eta).c_str(), loss, format_extra(extra).c_str());
    std::fflush(stderr);
    bar_drawn_ = true;
  } else {
    std::printf("epoch %lld/%lld step %lld/%lld loss %.4f %.1f step/s %.0f %s/s ETA %s%s\n",
                static_cast<long long>(epoch_ + 1), static_cast<long long>(epochs_), static_cast<long long>(step),
                static_cast<long long>(steps_), loss, steps_per_second, rate, rate_unit, format_duration(eta).c_str(),
                format_extra(extra).c_str());
    std::fflush(stdout);
  }
}

void Progress::end_epoch(const std::string& summary) {
  if (quiet_) return;
  if (terminal_ && bar_drawn_) std::fprintf(stderr, "\r\033[K");
  note(summary);
}

void Progress::note(const std::string& line) {
  if (quiet_) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace mixt
