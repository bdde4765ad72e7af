// write_confusion_heat_map() for the mixt program: the drawing lives in
// lib/mixt/libmixt_confusion_heat_map.so (drawing_module.h), built where OpenCV is.
#include "reports/confusion_heat_map.h"
#include "reports/drawing_module.h"

namespace mixt::cli {

namespace {
using DrawFunction = void (*)(const std::filesystem::path&, const at::Tensor&, const std::vector<std::string>&);

DrawFunction drawing_function(const std::filesystem::path& file) {
  static const DrawingModule module{"mixt_confusion_heat_map", "mixt_write_confusion_heat_map", "--confusion-png",
                                    "heat maps", "use --confusion FILE.csv"};
  return reinterpret_cast<DrawFunction>(drawing_entry(module, file));
}
}  // namespace

void check_heat_maps_drawable(const std::filesystem::path& file) { drawing_function(file); }

void write_confusion_heat_map(const std::filesystem::path& file, const at::Tensor& confusion,
                              const std::vector<std::string>& names) {
  drawing_function(file)(file, confusion, names);
}

}  // namespace mixt::cli
