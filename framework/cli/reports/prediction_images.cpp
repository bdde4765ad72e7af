#include "reports/prediction_images.h"

#include <fstream>

#include "assembly/components.h"
#include "mixt/error.h"
#include "files/png_encoder.h"

namespace mixt::cli {

namespace fs = std::filesystem;

PredictionImages::PredictionImages(const Registry& registry, const Config& recipe, std::int64_t classes,
                                   std::string folder)
    : task_(registry.make_task(task_section_of(recipe), TaskContext{at::kCPU, classes})),
      renders_(dynamic_cast<const RendersPredictions*>(task_.get())),
      folder_(std::move(folder)) {}

std::string PredictionImages::write(const std::string& image, const at::Tensor& output) {
  if (!renders_) return "";
  const RenderedPrediction drawn = renders_->render(output.to(at::kCPU, at::kFloat));
  if (!drawn.pixels.defined()) return "";
  std::string name = fs::path(image).stem().string();
  if (const int seen = names_used_[name]++; seen > 0) name += "-" + std::to_string(seen + 1);
  const fs::path file = folder_ / (name + "." + drawn.suffix + ".png");
  const std::vector<std::uint8_t> bytes = encode_png(drawn.pixels, drawn.palette);
  std::error_code ec;
  if (!folder_.empty()) fs::create_directories(folder_, ec);
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw runtime_error("cannot write " + file.string(), "name a folder you can write to with --draw-dir");
  return file.string();
}

at::Tensor class_probabilities(const at::Tensor& logits) {
  const at::Tensor probabilities = at::softmax(logits, 1);
  if (logits.dim() <= 2) return probabilities;
  return probabilities.flatten(2).mean(2);
}

}  // namespace mixt::cli
