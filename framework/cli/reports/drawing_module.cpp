#include "reports/drawing_module.h"

#include "common/shared_library.h"
#include "mixt/error.h"

namespace mixt::cli {

namespace {
std::filesystem::path module_path(const std::string& library) {
  std::error_code ec;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", ec);
  return program.parent_path().parent_path() / "lib" / "mixt" / ("lib" + library + ".so");
}
}  // namespace

void* drawing_entry(const DrawingModule& module, const std::filesystem::path& file) {
  try {
    return resident_symbol(module_path(module.library), module.entry);  // kept loaded: the function lives there
  } catch (const SharedLibraryError& e) {
    throw usage_error(
        std::string(module.option) + " " + file.string() + ": this mixt cannot draw " + module.what + " (" + e.what() +
            ")",
        std::string(module.alternative) + ", or build mixt where OpenCV is installed (scripts/setup installs it)");
  }
}

}  // namespace mixt::cli
