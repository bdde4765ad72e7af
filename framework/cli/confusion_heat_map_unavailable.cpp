// A build without OpenCV (the GPU build machine has none): --confusion-png is refused.
#include "confusion_heat_map.h"
#include "mixt/error.h"

namespace mixt::cli {

void check_heat_maps_drawable(const std::filesystem::path& file) {
  throw usage_error("--confusion-png " + file.string() + ": this mixt was built without OpenCV",
                    "use --confusion FILE.csv, or rebuild with OpenCV (scripts/setup installs it)");
}

void write_confusion_heat_map(const std::filesystem::path& file, const at::Tensor&, const std::vector<std::string>&) {
  check_heat_maps_drawable(file);
}

}  // namespace mixt::cli
