// mixt/task.h — the task interface: what a model is trained for.
//
// A task is the contract between the data, the model and the loss: what a blank input looks
// like, what shape the model's output must have, the training loss, what an evaluation
// reports and how, how a sample counts for speed and how the model's input is exported. A
// recipe chooses one (`task: {name: causal_lm}`; `classification` when it names none), so
// one model can be trained for another purpose and one task serves every model:
//
//   classification  inputs of any float shape -> logits [batch, classes]; cross-entropy;
//                   reports top-1 and top-5 accuracy, per-class accuracy
//   causal_lm       token ids [batch, time] -> logits [batch, time, vocab]; next-token
//                   cross-entropy over every position; reports perplexity
//
// The framework knows no task by name: everything it says or decides about one comes from
// here. Everything a task computes during training and evaluation stays on the device: the
// host reads an evaluation's totals once, at its end.
//
// Optional interfaces a task may derive from besides Task: HeadLoss (mixt/linear_head.h), the
// loss from a model's last linear map; RendersPredictions (mixt/renders_predictions.h, since
// 6.5), a sample's prediction drawn as an image for `mixt predict`.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mixt {

// One figure an evaluation reports besides its loss. Declared by Task::figures() (value
// unset) and filled in by TaskScore::finish.
struct Figure {
  std::string name;               // lower_snake; metrics.jsonl's val_<name>, TensorBoard's val/<name>
  std::string label;              // how the epoch's line names it: "top-1", "perplexity"
  bool percent = false;           // a fraction, printed as a percentage
  bool higher_is_better = true;   // what a monitor's `mode: auto` follows
  double value = NAN;
};

// A sample that holds many predictions (a window of tokens, an image's pixels) counts them
// for speed: step events and `mixt bench` rows then give <unit>_per_s beside samples/s.
struct Throughput {
  std::string unit;             // plural: "tokens", "pixels"
  std::int64_t per_sample = 1;  // predictions in one sample
};

// An input axis besides the batch that an exported model leaves open (the batch always is):
// a language model's sequence, a segmenter's height and width.
struct OpenAxis {
  std::int64_t input_dim = 1;   // in the input [batch, *sample]
  std::int64_t output_dim = 1;  // the output's axis that follows it
  std::string name;             // in the ONNX file and the metadata ("time"; "max_time")
  std::string words;            // in messages ("sequence length")
};

// What an exported model's input and output are, for the file's metadata and its checks.
struct ExportedInterface {
  std::vector<OpenAxis> open_axes{};  // each checked at sizes 1 and half the trace's
  std::string input_meaning;          // "token ids"; "" for float samples
  std::string input_layout;           // "token ids, int64, below the vocabulary"; "": the image layout
  std::string output_meaning = "logits";
};

// Per-class figures of an evaluation (`mixt evaluate --per-class` and its JSON).
struct ClassFigure {
  std::string name;            // the column's header and the JSON field: "accuracy", "iou"
  std::vector<double> values;  // one per class, NaN for a class the data never showed
  bool percent = true;
};

// One evaluation's running totals.
class TaskScore {
 public:
  virtual ~TaskScore() = default;
  // One batch: the model's output (under the policy's autocast) and the batch's targets,
  // both on the device. Must not read the device on the host.
  virtual void add(const at::Tensor& output, const at::Tensor& targets) = 0;
  // The totals so far, as float64 values: the host reads them once, at the evaluation's
  // end, and sums them over the ranks of a data-parallel run. So every figure must follow
  // from sums (counts, summed losses), not from per-rank means.
  virtual std::vector<double> totals() const = 0;
  // The mean loss per prediction, from totals summed over every rank.
  virtual double loss(const std::vector<double>& totals) const = 0;
  // The task's figures (Task::figures()'s, in that order, values set) from the same totals.
  virtual std::vector<Figure> finish(const std::vector<double>& totals) const = 0;
  // The confusion matrix so far, [classes, classes] int64 counts on the device (row: target,
  // column: prediction), when the evaluation was started with one; undefined otherwise, or
  // for a task that keeps none. Summed over ranks by the framework.
  virtual at::Tensor confusion() const { return {}; }
};

class Task {
 public:
  virtual ~Task() = default;
  // The model's input for a blank batch of `shape` ([batch, *sample_shape]) on `device`:
  // what `mixt check`, the build's checks and the export's trace feed the model (float
  // zeros for images, token id 0 for a language model). Its dtype tells the export's random
  // inputs: normal floats, or integers below the data's classes.
  virtual at::Tensor blank_inputs(const std::vector<std::int64_t>& shape, at::Device device) const = 0;
  // Why the model's output shape for a blank batch of `input_shape` does not fit this task
  // and the training data's `classes` (its vocabulary for a language model), or "" when it
  // fits. Said as "has shape [2, 7], expected [2, 10]: ...".
  virtual std::string output_problem(at::IntArrayRef output_shape, at::IntArrayRef input_shape,
                                     std::int64_t classes) const = 0;
  // The training loss of one batch: a scalar on the device, the mean over its predictions.
  virtual at::Tensor loss(const at::Tensor& output, const at::Tensor& targets) const = 0;
  // The figures an evaluation reports besides the loss (values unset).
  virtual std::vector<Figure> figures() const = 0;
  // A new evaluation's totals, all zero; with `confusion`, keeping a confusion matrix too
  // (`mixt evaluate --per-class`, `--confusion`, `--json`) when the task has one.
  virtual std::unique_ptr<TaskScore> start_evaluation(bool confusion) const = 0;

  // Optional: the defaults suit a task with one prediction per float sample.

  // How a sample of `sample_shape` counts for speed; none: one prediction per sample.
  virtual std::optional<Throughput> throughput(at::IntArrayRef /*sample_shape*/) const { return std::nullopt; }
  // What the data's class count is, in `mixt check`'s words: "10 classes", "vocabulary 50257".
  virtual std::string describe_classes(std::int64_t classes) const { return std::to_string(classes) + " classes"; }
  // The line `mixt run` ends with for the last evaluation; "": mixt's own ("validation: loss
  // 0.3120, top-1 91.20%, ..."). Scripts grep for it: keep it stable once published.
  virtual std::string summary(double /*loss*/, const std::vector<Figure>& /*figures*/) const { return ""; }
  // The per-class table's title ("per-class top-1 accuracy") and its columns, from the
  // evaluation's confusion matrix (int64 on the CPU, summed over ranks). Empty: none.
  virtual std::string per_class_title() const { return "per-class figures"; }
  virtual std::vector<ClassFigure> per_class(const at::Tensor& /*confusion*/) const { return {}; }
  // The exported model's open axes and the meaning of its input and output.
  virtual ExportedInterface exported() const { return {}; }
  // True when the output at each position predicts the input's next element, so that
  // `mixt generate` can sample from the model one token at a time.
  virtual bool predicts_next_token() const { return false; }
};

// What a task factory may need besides its own options (label smoothing and such are the
// task's options: `task: {name: classification, label_smoothing: 0.1}`).
struct TaskContext {
  at::Device device = at::kCPU;
  std::int64_t classes = 0;  // the training data's classes (its vocabulary for tokens); 0: unknown
};

}  // namespace mixt
