// A run's directory: runs/<name>/<timestamp>/ with recipe.yaml, metrics.jsonl, log.txt and
// checkpoints/ (per-epoch files, the newest k kept, and `last` pointing at the newest).
#pragma once

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/append_file.h"

namespace mixt {

class RunDirectory {
 public:
  // Creates <output>/<name>/<YYYYmmdd-HHMMSS>[-N]/.
  RunDirectory(const std::filesystem::path& output, const std::string& name);
  // Reopens an existing run directory, appending to its metrics and log (a torchelastic
  // restart continuing its run).
  struct Reopen {};
  RunDirectory(const std::filesystem::path& existing, Reopen);

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path checkpoints() const { return path_ / "checkpoints"; }

  void write_text(const std::string& file, const std::string& text) const;
  void append_metrics(const nlohmann::json& line);
  // Safe from any thread (warnings of the loader's workers come here too).
  void append_log(const std::string& line);

 private:
  void append_line(AppendFile& out, const std::string& line, const char* file, bool& warned);

  std::filesystem::path path_;
  AppendFile metrics_;
  AppendFile log_;
  std::recursive_mutex log_mutex_;  // recursive: a failing log.txt warns, and warnings come here
  std::recursive_mutex metrics_mutex_;  // warnings come from loader threads too
  bool metrics_warned_ = false, log_warned_ = false;
};

}  // namespace mixt
