// write_lr_curve_plot() for the mixt program: the drawing lives in
// lib/mixt/libmixt_lr_curve_plot.so (drawing_module.h), built where OpenCV is.
#include "reports/drawing_module.h"
#include "reports/lr_curve_plot.h"

namespace mixt::cli {

namespace {
using DrawFunction = void (*)(const std::filesystem::path&, const LrCurvePlot&);

DrawFunction drawing_function(const std::filesystem::path& file) {
  static const DrawingModule module{"mixt_lr_curve_plot", "mixt_write_lr_curve_plot", "--png", "plots",
                                    "leave out --png: the curve is in the JSON file"};
  return reinterpret_cast<DrawFunction>(drawing_entry(module, file));
}
}  // namespace

void check_lr_curves_drawable(const std::filesystem::path& file) { drawing_function(file); }

void write_lr_curve_plot(const std::filesystem::path& file, const LrCurvePlot& plot) {
  drawing_function(file)(file, plot);
}

}  // namespace mixt::cli
