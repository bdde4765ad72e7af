// tasks/classification — one label per sample: logits [batch, classes], cross-entropy
// (trainer.label_smoothing), and top-1 / top-5 accuracy counted as torchvision's
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

// Loss summed over samples, samples right at top-1 and at top-k, samples: float64 on the device.
class ClassificationScore : public mixt::TaskScore {
 public:
  // `k`: 0 when the classes were not known (TaskContext::classes 0): the first batch's.
  explicit ClassificationScore(std::int64_t k) : k_(k) {}

  void add(const at::Tensor& logits, const at::Tensor& targets) override {
    if (k_ == 0) k_ = top_k_for(logits.size(1));
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

 private:
  std::int64_t k_;
  at::Tensor sums_;
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
  std::unique_ptr<mixt::TaskScore> start_evaluation() const override {
    return std::make_unique<ClassificationScore>(k_);
  }

 private:
  std::int64_t k_;
  double label_smoothing_;
};

void register_components(mixt::Registrar& registrar) {
  registrar.add_task("classification",
                     "one label per sample: cross-entropy over [batch, classes] logits; top-1 and top-5 accuracy",
                     mixt::kNoOptions, [](const mixt::NoOptions&, const mixt::TaskContext& context) {
                       return std::make_unique<Classification>(context.classes, context.label_smoothing);
                     });
}

}  // namespace

MIXT_PLUGIN("task_classification", "1.0.0", register_components)
