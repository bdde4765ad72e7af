// write_confusion_heat_map() for the mixt program: loads the drawing module beside the
// plugins (lib/mixt/libmixt_confusion_heat_map.so, built where OpenCV is) on first use.
#include <dlfcn.h>

#include <string>

#include "confusion_heat_map.h"
#include "mixt/error.h"

namespace mixt::cli {

namespace {
using DrawFunction = void (*)(const std::filesystem::path&, const at::Tensor&, const std::vector<std::string>&);

std::filesystem::path module_path() {
  std::error_code ec;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", ec);
  return program.parent_path().parent_path() / "lib" / "mixt" / "libmixt_confusion_heat_map.so";
}

// The drawing function, or a usage error naming `file` and why it cannot be drawn.
DrawFunction drawing_function(const std::filesystem::path& file) {
  static DrawFunction draw = nullptr;
  static std::string failure;
  if (draw == nullptr && failure.empty()) {
    const std::filesystem::path module = module_path();
    void* handle = ::dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept loaded: the function lives there
    if (handle != nullptr) draw = reinterpret_cast<DrawFunction>(::dlsym(handle, "mixt_write_confusion_heat_map"));
    if (draw == nullptr) {
      const char* why = ::dlerror();
      failure = why ? why : (module.string() + ": no mixt_write_confusion_heat_map");
    }
  }
  if (draw == nullptr) {
    throw usage_error("--confusion-png " + file.string() + ": this mixt cannot draw heat maps (" + failure + ")",
                      "use --confusion FILE.csv, or build mixt where OpenCV is installed (scripts/setup installs it)");
  }
  return draw;
}
}  // namespace

void check_heat_maps_drawable(const std::filesystem::path& file) { drawing_function(file); }

void write_confusion_heat_map(const std::filesystem::path& file, const at::Tensor& confusion,
                              const std::vector<std::string>& names) {
  drawing_function(file)(file, confusion, names);
}

}  // namespace mixt::cli
