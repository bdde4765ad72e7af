// tasks/classification — one label per sample: logits [batch, classes], cross-entropy
// (with its option label_smoothing), and top-1 / top-5 accuracy counted as torchvision's
// classification reference does (references/classification/utils.py `accuracy`: one
// topk(k, largest, sorted) per batch; a sample counts for top-j when its label is among
// the first j indices). The task of every recipe that names none.
#include <mixt/plugin.h>
#include <mixt/task.h>

#include <algorithm>

namespace {

// 5, or the class count when there are fewer classes: the k of top-k accuracy.
std::int64_t top_k_for(std::int64_t classes) { return std::min<std::int64_t>(5, classes); }

std::vector<mixt::Figure> figures_for(std::int64_t k) {
  const std::string n = std::to_string(k);
  return {{"top1", "top-1", true, true}, {"top" + n, "top-" + n, true, true}};
}

// [classes, classes] counts (int64, on the logits' device) of top-1 predictions: row = label.
at::Tensor confusion_counts(const at::Tensor& logits, const at::Tensor& targets) {
  const std::int64_t classes = logits.size(1);
  const at::Tensor predicted = std::get<1>(logits.topk(1, /*dim=*/1, /*largest=*/true, /*sorted=*/true)).view({-1});
  const at::Tensor cells = targets.to(at::kLong).view({-1}) * classes + predicted;
  return at::bincount(cells, /*weights=*/{}, /*minlength=*/classes * classes).view({classes, classes});
}

// Row i's diagonal over its sum: the share of class i's samples predicted as class i (NaN
// for a class without samples).
std::vector<double> per_class_accuracy(const at::Tensor& confusion) {
  const at::Tensor counts = confusion.to(at::kCPU, at::kLong).contiguous();
  const std::int64_t classes = counts.size(0);
  const std::int64_t* cell = counts.data_ptr<std::int64_t>();
  std::vector<double> accuracy(static_cast<std::size_t>(classes), NAN);
  for (std::int64_t i = 0; i < classes; ++i) {
    std::int64_t samples = 0;
    for (std::int64_t j = 0; j < classes; ++j) samples += cell[i * classes + j];
    if (samples > 0) accuracy[i] = static_cast<double>(cell[i * classes + i]) / static_cast<double>(samples);
  }
  return accuracy;
}

// Loss summed over samples, samples right at top-1 and at top-k, samples: float64 on the
// device; and the confusion matrix when asked for.
class ClassificationScore : public mixt::TaskScore {
 public:
  // `k`: 0 when the classes were not known (TaskContext::classes 0): the first batch's.
  ClassificationScore(std::int64_t k, bool keep_confusion) : k_(k), keep_confusion_(keep_confusion) {}

  void add(const at::Tensor& logits, const at::Tensor& targets) override {
    if (k_ == 0) k_ = top_k_for(logits.size(1));
    if (keep_confusion_) {
      const at::Tensor counts = confusion_counts(logits, targets);
      confusion_ = confusion_.defined() ? confusion_ + counts : counts;
    }
    const at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), targets, {}, at::Reduction::Sum);
    const at::Tensor predicted = std::get<1>(logits.topk(k_, /*dim=*/1, /*largest=*/true, /*sorted=*/true)).t();
    const at::Tensor correct = predicted.eq(targets.view({1, -1}).expand_as(predicted));
    const at::Tensor counts = at::stack({correct.slice(0, 0, 1).sum(), correct.sum()}).to(at::kDouble);
    const at::Tensor samples = at::full({1}, static_cast<double>(targets.size(0)), counts.options());
    const at::Tensor batch = at::cat({loss.to(at::kDouble).view({1}), counts, samples});
    sums_ = sums_.defined() ? sums_ + batch : batch;
  }
  std::vector<double> totals() const override {
    if (!sums_.defined()) return {0, 0, 0, 0};
    const at::Tensor host = sums_.cpu().contiguous();
    return {host.data_ptr<double>(), host.data_ptr<double>() + 4};
  }
  double loss(const std::vector<double>& t) const override { return t[0] / t[3]; }
  std::vector<mixt::Figure> finish(const std::vector<double>& t) const override {
    std::vector<mixt::Figure> figures = figures_for(k_ > 0 ? k_ : 5);
    figures[0].value = t[1] / t[3];
    figures[1].value = t[2] / t[3];
    return figures;
  }
  at::Tensor confusion() const override { return confusion_; }

 private:
  std::int64_t k_;
  bool keep_confusion_;
  at::Tensor sums_;
  at::Tensor confusion_;
};

struct ClassificationOptions {
  double label_smoothing = 0.0;
};

class Classification : public mixt::Task {
 public:
  Classification(std::int64_t classes, double label_smoothing)
      : k_(classes > 0 ? top_k_for(classes) : 0), label_smoothing_(label_smoothing) {}

  at::Tensor blank_inputs(const std::vector<std::int64_t>& shape, at::Device device) const override {
    return at::zeros(shape, at::TensorOptions().device(device));
  }
  std::string output_problem(at::IntArrayRef output, at::IntArrayRef input, std::int64_t classes) const override {
    if (output.size() == 2 && output[0] == input[0] && output[1] == classes) return "";
    return "has shape " + c10::str(output) + ", expected [" + std::to_string(input[0]) + ", " +
           std::to_string(classes) + "]: one row per sample, one logit per class of the training data (" +
           std::to_string(classes) + ")";
  }
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) const override {
    return at::cross_entropy_loss(logits, targets, {}, at::Reduction::Mean, -100, label_smoothing_);
  }
  std::vector<mixt::Figure> figures() const override { return figures_for(k_ > 0 ? k_ : 5); }
  std::unique_ptr<mixt::TaskScore> start_evaluation(bool confusion) const override {
    return std::make_unique<ClassificationScore>(k_, confusion);
  }
  // What scripts and docs grep for: "test accuracy: 91.20% (top-5 99.10%, val loss 0.2500)".
  std::string summary(double loss, const std::vector<mixt::Figure>& figures) const override {
    char line[160];
    std::snprintf(line, sizeof(line), "test accuracy: %.2f%% (%s %.2f%%, val loss %.4f)", 100.0 * figures.at(0).value,
                  figures.at(1).label.c_str(), 100.0 * figures.at(1).value, loss);
    return line;
  }
  std::string per_class_title() const override { return "per-class top-1 accuracy"; }
  std::vector<mixt::ClassFigure> per_class(const at::Tensor& confusion) const override {
    return {{"accuracy", per_class_accuracy(confusion), true}};
  }

 private:
  std::int64_t k_;
  double label_smoothing_;
};

using O = ClassificationOptions;
const auto kOptions = mixt::OptionsOf<O>().add(
    &O::label_smoothing, "label_smoothing", "cross-entropy label smoothing in [0, 1), as `torch.nn.CrossEntropyLoss`",
    mixt::at_least(0) && mixt::below(1));

void register_components(mixt::Registrar& registrar) {
  registrar.add_task("classification",
                     "one label per sample: cross-entropy over [batch, classes] logits; top-1 and top-5 accuracy",
                     kOptions, [](const O& o, const mixt::TaskContext& context) {
                       return std::make_unique<Classification>(context.classes, o.label_smoothing);
                     });
}

}  // namespace

MIXT_PLUGIN("task_classification", "2.0.0", register_components)
