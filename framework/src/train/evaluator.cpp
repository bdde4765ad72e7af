#include "train/evaluator.h"

#include "assembly/model_input.h"
#include "common/interrupt.h"
#include "mixt/padded_shards.h"
#include "train/packed_forward.h"

namespace mixt {

Evaluation Evaluator::evaluate(Dataset& dataset, at::Tensor* confusion) const {
  Model& model = *components_.model;
  model.eval();
  at::NoGradGuard no_grad;
  dataset.start_epoch(0);
  const at::Device device = facts_.device;
  const std::unique_ptr<TaskScore> score = components_.task->start_evaluation(confusion != nullptr);
  std::int64_t samples = 0;
  // Data parallel: the padding of this rank's shard (samples of other ranks again) is not
  // counted, so that the sums over ranks count every sample once.
  std::int64_t own_left = own_samples_of(dataset);
  while (std::optional<Batch> batch = dataset.next_batch()) {
    if (own_left <= 0) continue;  // padding only: served, not counted
    if (batch->inputs.size(0) > own_left) {
      batch->inputs = batch->inputs.slice(0, 0, own_left);
      batch->targets = batch->targets.slice(0, 0, own_left);
    }
    own_left -= batch->inputs.size(0);
    // Ctrl-C: the epoch's checkpoint is written before its evaluation, so stop now, unless
    // the evaluation ends in a collective (data parallel: the stop is agreed at the epoch's end).
    if (coordinator_.may_stop_alone() && interrupt_requested()) {
      model.train();
      Evaluation stopped;
      stopped.interrupted = true;
      return stopped;
    }
    const at::Tensor inputs = model_input(components_, facts_, batch->inputs);
    const at::Tensor targets = batch->targets.to(device, true);
    AutocastScope scope = components_.precision->autocast(device.type());
    const at::Tensor output = forward_batch(components_, inputs, packed_positions(components_, targets));
    score->add(output, targets);
    samples += inputs.size(0);
  }
  model.train();
  // Each rank evaluated its shard (with the same model, so the same figures).
  std::vector<double> totals = score->totals();
  totals.push_back(static_cast<double>(samples));
  totals = coordinator_.sum(totals);
  const at::Tensor confusion_sum = confusion ? score->confusion() : at::Tensor();
  if (confusion_sum.defined()) {
    const at::Tensor local = confusion_sum.to(at::kCPU, at::kLong).contiguous();
    const std::vector<double> cells = coordinator_.sum(
        std::vector<double>(local.data_ptr<std::int64_t>(), local.data_ptr<std::int64_t>() + local.numel()));
    *confusion = at::tensor(cells, at::kDouble).to(at::kLong).view(local.sizes());
  }
  Evaluation eval;
  eval.samples = static_cast<std::int64_t>(totals.back());
  totals.pop_back();
  if (eval.samples > 0) {
    eval.loss = score->loss(totals);
    eval.figures = score->finish(totals);
  }
  return eval;
}

}  // namespace mixt
