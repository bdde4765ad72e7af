// A build without OpenCV (the GPU build machine has none): --confusion-png is refused.
#include "confusion_heat_map.h"
#include "mixt/error.h"

namespace mixt::cli {

bool can_draw_heat_maps() { return false; }

void write_confusion_heat_map(const std::filesystem::path& file, const at::Tensor&, const std::vector<std::string>&) {
  throw usage_error("--confusion-png " + file.string() + ": this mixt was built without OpenCV",
                    "use --confusion FILE.csv, or rebuild with OpenCV (scripts/setup installs it)");
}

}  // namespace mixt::cli
