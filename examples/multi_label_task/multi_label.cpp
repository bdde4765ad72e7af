// A task of your own, out of tree (docs/plugins.md, "A task"): multi-label classification.
// Each class of the data has a set of attributes (`attributes: ["footwear: 5 7 9", ...]`), the
// model gives one logit per attribute, the loss is binary cross-entropy with logits, and an
// evaluation reports the mean average precision over the attributes (mAP, as
// sklearn.metrics.average_precision_score computes it per attribute).
//
// mixt sums an evaluation's totals over ranks, so every figure must follow from sums: the
// scores are counted in kBins bins per attribute (positives and negatives apart), and the
// precision-recall curve is swept over the bins at the end. That is sklearn's average
// precision of the scores rounded down to a multiple of 1/kBins: exact up to the binning.
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/task.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t kBins = 1000;

struct Attribute {
  std::string name;
  std::vector<std::int64_t> classes;
};

// "footwear: 5 7 9" -> {footwear, {5, 7, 9}}; nothing when it does not read so.
std::optional<Attribute> parse_attribute(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  Attribute attribute{text.substr(0, colon), {}};
  std::istringstream classes(text.substr(colon + 1));
  for (std::string word; classes >> word;) {
    if (word.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    attribute.classes.push_back(std::stoll(word));
  }
  if (attribute.classes.empty()) return std::nullopt;
  return attribute;
}

// The average precision of one attribute from its binned counts (`positives`, `negatives`:
// kBins each, bin b holding scores in [b / kBins, (b + 1) / kBins)): the precision at each
// threshold weighted by the recall it adds. NaN without positives.
double average_precision(const double* positives, const double* negatives) {
  double all_positives = 0;
  for (std::int64_t b = 0; b < kBins; ++b) all_positives += positives[b];
  if (all_positives == 0) return NAN;
  double true_positives = 0, false_positives = 0, recall_before = 0, sum = 0;
  for (std::int64_t b = kBins - 1; b >= 0; --b) {
    if (positives[b] + negatives[b] == 0) continue;
    true_positives += positives[b];
    false_positives += negatives[b];
    const double recall = true_positives / all_positives;
    sum += (recall - recall_before) * true_positives / (true_positives + false_positives);
    recall_before = recall;
  }
  return sum;
}

// [batch, attributes] float targets: a dataset's multi-hot rows as they are, class ids through `table`.
at::Tensor multi_hot(const at::Tensor& targets, const at::Tensor& table) {
  if (targets.dim() == 2) return targets.to(at::kFloat);
  return table.to(targets.device()).index_select(0, targets.to(at::kLong));
}

// On the device: the summed loss, the count of predictions, and each attribute's binned
// positive and negative scores.
class MultiLabelScore : public mixt::TaskScore {
 public:
  explicit MultiLabelScore(at::Tensor table) : table_(std::move(table)) {}

  void add(const at::Tensor& logits, const at::Tensor& targets) override {
    const at::Tensor target = multi_hot(targets, table_);
    const at::Tensor scores = logits.to(at::kFloat);
    const at::Tensor loss =
        at::binary_cross_entropy_with_logits(scores, target, {}, {}, at::Reduction::Sum).to(at::kDouble);
    const std::int64_t attributes = scores.size(1);
    const at::Tensor bins = (scores.sigmoid() * kBins).floor().clamp(0, kBins - 1).to(at::kLong);
    const at::Tensor cells = (bins + at::arange(attributes, bins.options()) * kBins).view({-1});
    const at::Tensor flat = target.to(at::kDouble).view({-1});
    const std::int64_t size = attributes * kBins;
    const at::Tensor positives = at::bincount(cells, flat, size);
    const at::Tensor negatives = at::bincount(cells, 1.0 - flat, size);
    const at::Tensor count = at::full({1}, static_cast<double>(target.numel()), loss.options());
    const at::Tensor batch = at::cat({loss.view({1}), count, positives, negatives});
    sums_ = sums_.defined() ? sums_ + batch : batch;
  }
  std::vector<double> totals() const override {
    if (!sums_.defined()) return std::vector<double>(2 + 2 * table_.size(1) * kBins, 0.0);
    const at::Tensor host = sums_.cpu().contiguous();
    return {host.data_ptr<double>(), host.data_ptr<double>() + host.numel()};
  }
  double loss(const std::vector<double>& t) const override { return t[0] / t[1]; }
  std::vector<mixt::Figure> finish(const std::vector<double>& t) const override {
    const std::int64_t attributes = table_.size(1);
    const double* positives = t.data() + 2;
    const double* negatives = positives + attributes * kBins;
    double sum = 0;
    std::int64_t seen = 0;  // attributes with a positive in the data
    for (std::int64_t a = 0; a < attributes; ++a) {
      const double ap = average_precision(positives + a * kBins, negatives + a * kBins);
      if (std::isnan(ap)) continue;
      sum += ap;
      ++seen;
    }
    return {{"map", "mAP", true, true, seen > 0 ? sum / static_cast<double>(seen) : NAN}};
  }

 private:
  at::Tensor table_;  // [classes, attributes] 0/1
  at::Tensor sums_;
};

class MultiLabel : public mixt::Task {
 public:
  MultiLabel(std::vector<Attribute> attributes, at::Tensor table)
      : attributes_(std::move(attributes)), table_(std::move(table)) {}

  at::Tensor blank_inputs(const std::vector<std::int64_t>& shape, at::Device device) const override {
    return at::zeros(shape, at::TensorOptions().device(device));
  }
  std::string output_problem(at::IntArrayRef output, at::IntArrayRef input, std::int64_t) const override {
    const auto attributes = static_cast<std::int64_t>(attributes_.size());
    if (output.size() == 2 && output[0] == input[0] && output[1] == attributes) return "";
    return "has shape " + c10::str(output) + ", expected [" + std::to_string(input[0]) + ", " +
           std::to_string(attributes) + "]: one logit per attribute (set the model's num_classes to " +
           std::to_string(attributes) + ")";
  }
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) const override {
    return at::binary_cross_entropy_with_logits(logits, multi_hot(targets, table_).to(logits.scalar_type()));
  }
  std::vector<mixt::Figure> figures() const override { return {{"map", "mAP", true, true}}; }
  std::unique_ptr<mixt::TaskScore> start_evaluation(bool /*confusion: none for sets of labels*/) const override {
    return std::make_unique<MultiLabelScore>(table_);
  }
  mixt::ExportedInterface exported() const override {
    mixt::ExportedInterface interface;
    interface.output_meaning = "one logit per attribute (its sigmoid: the attribute's probability)";
    return interface;
  }

 private:
  std::vector<Attribute> attributes_;
  at::Tensor table_;
};

struct MultiLabelOptions {
  std::vector<std::string> attributes;
  mixt::RecipeSection where;
};

using O = MultiLabelOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::attributes, "attributes",
             "one entry per attribute, \"name: class class ...\": the classes of the data that have it",
             mixt::Check<std::vector<std::string>>(
                 [](const std::vector<std::string>& given) -> std::optional<std::string> {
                   if (given.empty()) return "needs at least one attribute, e.g. [\"footwear: 5 7 9\"]";
                   for (const std::string& text : given) {
                     if (!parse_attribute(text)) {
                       return "'" + text + "' is not \"name: class class ...\" (e.g. \"footwear: 5 7 9\")";
                     }
                   }
                   return std::nullopt;
                 }))
        .recipe_section(&O::where);

std::unique_ptr<mixt::Task> make_multi_label(const O& o, const mixt::TaskContext& context) {
  std::vector<Attribute> attributes;
  for (const std::string& text : o.attributes) attributes.push_back(*parse_attribute(text));
  std::int64_t classes = context.classes;
  for (const Attribute& attribute : attributes) {
    for (std::int64_t c : attribute.classes) {
      if (context.classes > 0 && c >= context.classes) {
        o.where.fail("attributes",
                     "attribute '" + attribute.name + "' names class " + std::to_string(c) + ", and the data has " +
                         std::to_string(context.classes) + " classes",
                     "classes count from 0");
      }
      classes = std::max(classes, c + 1);
    }
  }
  at::Tensor table = at::zeros({classes, static_cast<std::int64_t>(attributes.size())});
  for (std::size_t a = 0; a < attributes.size(); ++a) {
    for (std::int64_t c : attributes[a].classes) table[c][static_cast<std::int64_t>(a)] = 1.0;
  }
  return std::make_unique<MultiLabel>(std::move(attributes), table.to(context.device));
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_task("multi_label",
                     "several labels per sample: binary cross-entropy over [batch, attributes] logits; mean "
                     "average precision",
                     kOptions, make_multi_label);
}

}  // namespace

MIXT_PLUGIN("multi_label_task", "1.0.0", register_components)
