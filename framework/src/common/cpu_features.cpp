#include "common/cpu_features.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mixt {

bool cpuinfo_has_native_bfloat16(std::string_view cpuinfo) {
  std::istringstream lines{std::string(cpuinfo)};
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream flags(line.substr(colon + 1));
    for (std::string flag; flags >> flag;) {
      if (flag == "avx512_bf16" || flag == "amx_bf16" || flag == "bf16") return true;
    }
  }
  return false;
}

bool cpu_has_native_bfloat16() {
  if (const char* forced = std::getenv("MIXT_CPU_NATIVE_BF16"); forced && *forced) {
    return std::string(forced) != "0";
  }
  static const bool native = [] {
    std::ifstream file("/proc/cpuinfo");
    if (!file) return true;
    std::stringstream text;
    text << file.rdbuf();
    return text.str().empty() || cpuinfo_has_native_bfloat16(text.str());
  }();
  return native;
}

std::string native_bfloat16_features() {
#if defined(__aarch64__)
  return "BF16";
#else
  return "avx512_bf16/AMX";
#endif
}

}  // namespace mixt
