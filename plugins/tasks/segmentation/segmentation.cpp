// tasks/segmentation — semantic segmentation, as torchvision's segmentation reference trains
// and scores it (references/segmentation: train.py's criterion, utils.ConfusionMatrix):
// images [batch, channels, height, width] in, logits [batch, classes, height, width] out, a
// class index per pixel as the target ([batch, height, width]; `ignore_index`, 255 as in
// Pascal VOC, marks pixels that count nowhere). The loss is the mean per-pixel cross-entropy
// over the counted pixels; an evaluation sums the pixels' confusion matrix and reports the
// mean intersection over union (over the classes present in the targets or the
// predictions), the pixel accuracy, and per class the IoU (`mixt evaluate --per-class`).
// `mixt predict --image` writes each image's arg-max as a palette PNG in VOC's colours.
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/renders_predictions.h>
#include <mixt/task.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

// [classes, classes] float64 counts of the counted pixels: row = target, column = arg-max.
at::Tensor pixel_confusion(const at::Tensor& logits, const at::Tensor& targets, std::int64_t ignore_index) {
  const std::int64_t classes = logits.size(1);
  const at::Tensor target = targets.to(at::kLong).reshape({-1});
  const at::Tensor predicted = logits.argmax(1).reshape({-1});
  const at::Tensor counted = target.ne(ignore_index) & target.ge(0) & target.lt(classes);
  const at::Tensor cells = (target * classes + predicted).masked_select(counted);
  return at::bincount(cells, /*weights=*/{}, /*minlength=*/classes * classes).view({classes, classes}).to(at::kDouble);
}

// Per class: diagonal / (row + column - diagonal); NaN for a class neither the targets nor
// the predictions hold.
std::vector<double> intersection_over_union(const double* confusion, std::int64_t classes) {
  std::vector<double> iou(static_cast<std::size_t>(classes), NAN);
  for (std::int64_t c = 0; c < classes; ++c) {
    double row = 0, column = 0;
    for (std::int64_t k = 0; k < classes; ++k) {
      row += confusion[c * classes + k];
      column += confusion[k * classes + c];
    }
    const double diagonal = confusion[c * classes + c];
    if (row + column > 0) iou[static_cast<std::size_t>(c)] = diagonal / (row + column - diagonal);
  }
  return iou;
}

double mean_of_seen(const std::vector<double>& values) {
  double sum = 0;
  int seen = 0;
  for (double v : values) {
    if (std::isnan(v)) continue;
    sum += v;
    ++seen;
  }
  return seen > 0 ? sum / seen : NAN;
}

// The VOC colour map (VOCdevkit's labelcolormap): index i's RGB at 3i, the bits of i spread
// over the colours' high bits. Class 0 black, 1 dark red, ..., 255 VOC's border cream.
std::vector<std::uint8_t> voc_palette() {
  std::vector<std::uint8_t> palette(3 * 256);
  for (int i = 0; i < 256; ++i) {
    int c = i;
    for (int j = 0; j < 8; ++j, c >>= 3) {
      for (int channel = 0; channel < 3; ++channel) {
        palette[static_cast<std::size_t>(3 * i + channel)] |=
            static_cast<std::uint8_t>(((c >> channel) & 1) << (7 - j));
      }
    }
  }
  return palette;
}

std::vector<mixt::Figure> segmentation_figures() {
  return {{"miou", "mIoU", true, true}, {"pixel_accuracy", "pixel accuracy", true, true}};
}

// On the device: the summed loss, the counted pixels, and the confusion matrix (always: the
// figures come from it).
class SegmentationScore : public mixt::TaskScore {
 public:
  SegmentationScore(std::int64_t ignore_index, std::int64_t classes) : ignore_index_(ignore_index), classes_(classes) {}

  void add(const at::Tensor& logits, const at::Tensor& targets) override {
    classes_ = logits.size(1);
    const at::Tensor target = targets.to(at::kLong);
    const at::Tensor loss =
        at::cross_entropy_loss(logits.to(at::kFloat), target, {}, at::Reduction::Sum, ignore_index_).to(at::kDouble);
    const at::Tensor pixels = target.ne(ignore_index_).sum().to(at::kDouble);
    const at::Tensor batch =
        at::cat({at::stack({loss, pixels}), pixel_confusion(logits, target, ignore_index_).view({-1})});
    sums_ = sums_.defined() ? sums_ + batch : batch;
  }
  std::vector<double> totals() const override {
    if (!sums_.defined()) return std::vector<double>(static_cast<std::size_t>(2 + classes_ * classes_), 0.0);
    const at::Tensor host = sums_.cpu().contiguous();
    return {host.data_ptr<double>(), host.data_ptr<double>() + host.numel()};
  }
  double loss(const std::vector<double>& t) const override { return t[0] / t[1]; }
  std::vector<mixt::Figure> finish(const std::vector<double>& t) const override {
    const double* confusion = t.data() + 2;
    double correct = 0, counted = 0;
    for (std::int64_t c = 0; c < classes_; ++c) correct += confusion[c * classes_ + c];
    for (std::int64_t i = 0; i < classes_ * classes_; ++i) counted += confusion[i];
    std::vector<mixt::Figure> figures = segmentation_figures();
    figures[0].value = mean_of_seen(intersection_over_union(confusion, classes_));
    figures[1].value = counted > 0 ? correct / counted : NAN;
    return figures;
  }
  at::Tensor confusion() const override {
    if (!sums_.defined()) return {};
    return sums_.slice(0, 2).view({classes_, classes_}).to(at::kLong);
  }

 private:
  std::int64_t ignore_index_;
  std::int64_t classes_;  // the data's, until the first batch's logits say
  at::Tensor sums_;
};

class Segmentation : public mixt::Task, public mixt::RendersPredictions {
 public:
  Segmentation(std::int64_t classes, std::int64_t ignore_index, double label_smoothing)
      : classes_(classes), ignore_index_(ignore_index), label_smoothing_(label_smoothing) {}

  at::Tensor blank_inputs(const std::vector<std::int64_t>& shape, at::Device device) const override {
    return at::zeros(shape, at::TensorOptions().device(device));
  }
  std::string output_problem(at::IntArrayRef output, at::IntArrayRef input, std::int64_t classes) const override {
    if (input.size() != 4) {
      return "cannot be scored: segmentation takes images [channels, height, width], and the training data's "
             "samples are " +
             c10::str(input.slice(1));
    }
    if (output.size() == 4 && output[0] == input[0] && output[1] == classes && output[2] == input[2] &&
        output[3] == input[3]) {
      return "";
    }
    return "has shape " + c10::str(output) + ", expected [" + std::to_string(input[0]) + ", " +
           std::to_string(classes) + ", " + std::to_string(input[2]) + ", " + std::to_string(input[3]) +
           "]: a logit per class of the training data (" + std::to_string(classes) +
           ") at every pixel of the input (upsample the logits to the image's size)";
  }
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) const override {
    return at::cross_entropy_loss(logits, targets.to(at::kLong), {}, at::Reduction::Mean, ignore_index_,
                                  label_smoothing_);
  }
  std::vector<mixt::Figure> figures() const override { return segmentation_figures(); }
  std::unique_ptr<mixt::TaskScore> start_evaluation(bool /*confusion: always kept*/) const override {
    return std::make_unique<SegmentationScore>(ignore_index_, classes_);
  }
  // Every pixel is a prediction.
  std::optional<mixt::Throughput> throughput(at::IntArrayRef sample_shape) const override {
    if (sample_shape.size() != 3) return std::nullopt;
    return mixt::Throughput{"pixels", sample_shape[1] * sample_shape[2]};
  }
  std::string per_class_title() const override { return "per-class IoU (pixels)"; }
  std::vector<mixt::ClassFigure> per_class(const at::Tensor& confusion) const override {
    const at::Tensor counts = confusion.to(at::kCPU, at::kDouble).contiguous();
    return {{"iou", intersection_over_union(counts.data_ptr<double>(), counts.size(0)), true}};
  }
  // The arg-max class of each pixel, as VOC's masks store classes: palette indices.
  mixt::RenderedPrediction render(const at::Tensor& logits) const override {
    if (logits.dim() != 3 || logits.size(0) > 256) return {};  // no picture of that
    return {logits.argmax(0).to(at::kByte), voc_palette(), "mask"};
  }
  mixt::ExportedInterface exported() const override {
    mixt::ExportedInterface interface;
    interface.output_meaning = "logits per class at every pixel [batch, classes, height, width]";
    // A segmentation model labels images of any size: the file's height and width stay
    // symbolic, and the export checks them at other sizes (mixt::upsample_bilinear_like).
    interface.open_axes = {{2, 2, "height", "image height"}, {3, 3, "width", "image width"}};
    return interface;
  }

 private:
  std::int64_t classes_;
  std::int64_t ignore_index_;
  double label_smoothing_;
};

struct SegmentationOptions {
  std::int64_t ignore_index = 255;
  double label_smoothing = 0.0;
};

using O = SegmentationOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::ignore_index, "ignore_index",
             "the target value of pixels that count nowhere (255: Pascal VOC's borders and \"difficult\" regions)")
        .add(&O::label_smoothing, "label_smoothing",
             "cross-entropy label smoothing in [0, 1), as `torch.nn.CrossEntropyLoss`",
             mixt::at_least(0) && mixt::below(1));

void register_components(mixt::Registrar& registrar) {
  registrar.add_task("segmentation",
                     "a class per pixel: cross-entropy over [batch, classes, height, width] logits (ignore_index "
                     "pixels skipped); mean IoU, pixel accuracy, per-class IoU",
                     kOptions, [](const O& o, const mixt::TaskContext& context) {
                       return std::make_unique<Segmentation>(context.classes, o.ignore_index, o.label_smoothing);
                     });
}

}  // namespace

MIXT_PLUGIN("task_segmentation", "1.0.0", register_components)
