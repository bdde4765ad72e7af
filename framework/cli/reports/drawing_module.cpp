#include "reports/drawing_module.h"

#include <dlfcn.h>

#include <map>

#include "mixt/error.h"

namespace mixt::cli {

namespace {
std::filesystem::path module_path(const std::string& library) {
  std::error_code ec;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", ec);
  return program.parent_path().parent_path() / "lib" / "mixt" / ("lib" + library + ".so");
}

struct Loaded {
  void* entry = nullptr;
  std::string failure;
};
}  // namespace

void* drawing_entry(const DrawingModule& module, const std::filesystem::path& file) {
  static std::map<std::string, Loaded> loaded;
  auto [at, first] = loaded.try_emplace(module.library);
  Loaded& found = at->second;
  if (first) {
    const std::filesystem::path library = module_path(module.library);
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept loaded: the function lives there
    if (handle != nullptr) found.entry = ::dlsym(handle, module.entry);
    if (found.entry == nullptr) {
      const char* why = ::dlerror();
      found.failure = why ? why : (library.string() + ": no " + module.entry);
    }
  }
  if (found.entry == nullptr) {
    throw usage_error(
        std::string(module.option) + " " + file.string() + ": this mixt cannot draw " + module.what + " (" +
            found.failure + ")",
        std::string(module.alternative) + ", or build mixt where OpenCV is installed (scripts/setup installs it)");
  }
  return found.entry;
}

}  // namespace mixt::cli
