#include "run_directory.h"

#include <ctime>

#include "mixt/error.h"

namespace mixt {

namespace fs = std::filesystem;

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
    path_ = parent / (std::string(stamp) + "-" + std::to_string(suffix));
  }
  metrics_.open(path_ / "metrics.jsonl");
  log_.open(path_ / "log.txt");
}

RunDirectory::RunDirectory(const fs::path& existing, Reopen) : path_(existing) {
  if (!fs::is_directory(path_)) throw runtime_error("run directory to continue does not exist: " + path_.string());
  metrics_.open(path_ / "metrics.jsonl", std::ios::app);
  log_.open(path_ / "log.txt", std::ios::app);
}

void RunDirectory::write_text(const std::string& file, const std::string& text) const {
  std::ofstream out(path_ / file);
  out << text;
  if (!out) throw runtime_error("cannot write " + (path_ / file).string());
}

void RunDirectory::append_metrics(const nlohmann::json& line) {
  metrics_ << line.dump() << '\n';
  metrics_.flush();
}

void RunDirectory::append_log(const std::string& line) {
  log_ << line << '\n';
  log_.flush();
}

}  // namespace mixt
