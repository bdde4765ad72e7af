// mixt/task.h — the task interface: what a model is trained for.
//
// A task is the contract between the data, the model and the loss: what a blank input looks
// like, what shape the model's output must have, the training loss, and what an evaluation
// reports. A recipe chooses one (`task: {name: causal_lm}`; `classification` when it names
// none), so one model can be trained for another purpose and one task serves every model:
//
//   classification  inputs of any float shape -> logits [batch, classes]; cross-entropy;
//                   reports top-1 and top-5 accuracy
//   causal_lm       token ids [batch, time] -> logits [batch, time, vocab]; next-token
//                   cross-entropy over every position; reports perplexity
//
// Everything a task computes during training and evaluation stays on the device: the host
// reads an evaluation's totals once, at its end.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <memory>
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

// One evaluation's running totals.
class TaskScore {
 public:
  virtual ~TaskScore() = default;
  // One batch: the model's output (under the policy's autocast) and the batch's targets,
  // both on the device. Must not read the device on the host.
  virtual void add(const at::Tensor& output, const at::Tensor& targets) = 0;
  // The totals so far, as float64 values: the host reads them once, at the evaluation's
  // end, and sums them over the ranks of a data-parallel run.
  virtual std::vector<double> totals() const = 0;
  // The mean loss per prediction, from totals summed over every rank.
  virtual double loss(const std::vector<double>& totals) const = 0;
  // The task's figures (Task::figures()'s, in that order, values set) from the same totals.
  virtual std::vector<Figure> finish(const std::vector<double>& totals) const = 0;
};

class Task {
 public:
  virtual ~Task() = default;
  // The model's input for a blank batch of `shape` ([batch, *sample_shape]) on `device`:
  // what `mixt check` and the build's checks feed the model once (float zeros for images,
  // token id 0 for a language model).
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
  // A new evaluation's totals, all zero.
  virtual std::unique_ptr<TaskScore> start_evaluation() const = 0;
  // What one prediction is, for throughput: "sample", or "token" for a language model
  // (then every input element is one).
  virtual std::string prediction_unit() const { return "sample"; }
};

// What a task factory may need besides its own options.
struct TaskContext {
  at::Device device = at::kCPU;
  std::int64_t classes = 0;     // the training data's classes (its vocabulary for tokens)
  double label_smoothing = 0;   // trainer.label_smoothing, for a cross-entropy loss
};

}  // namespace mixt
