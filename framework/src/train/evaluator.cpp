#include "train/evaluator.h"

#include "common/interrupt.h"
#include "mixt/padded_shards.h"
#include "train/accuracy.h"
#include "train/confusion_matrix.h"
#include "assembly/model_input.h"

namespace mixt {

Evaluation Evaluator::evaluate(Dataset& dataset, at::Tensor* confusion) const {
  Model& model = *components_.model;
  model.eval();
  at::NoGradGuard no_grad;
  dataset.start_epoch(0);
  const at::Device device = components_.device;
  at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));
  at::Tensor correct = at::zeros({2}, at::TensorOptions().dtype(at::kLong).device(device));  // top-1, top-k
  std::int64_t samples = 0, top_k = 0;
  at::Tensor confusion_sum;  // on the device, when asked for
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
    const at::Tensor inputs = model_input(components_, batch->inputs);
    const at::Tensor targets = batch->targets.to(device, true);
    AutocastScope scope = components_.precision->autocast(device.type());
    const at::Tensor logits = model.forward(inputs);
    loss_sum += at::cross_entropy_loss(logits.to(at::kFloat), targets, {}, at::Reduction::Sum).to(at::kDouble);
    if (top_k == 0) top_k = top_k_for(logits.size(1));
    correct += count_top1_and_top_k(logits, targets, top_k);
    if (confusion) {
      const at::Tensor counts = confusion_counts(logits, targets, logits.size(1));
      confusion_sum = confusion_sum.defined() ? confusion_sum + counts : counts;
    }
    samples += inputs.size(0);
  }
  model.train();
  // Each rank evaluated its shard (with the same model, so the same class count).
  const at::Tensor counts = correct.cpu();
  const std::vector<double> sums =
      coordinator_.sum({loss_sum.item<double>(), static_cast<double>(counts[0].item<std::int64_t>()),
                        static_cast<double>(counts[1].item<std::int64_t>()), static_cast<double>(samples)});
  if (confusion && confusion_sum.defined()) {
    const at::Tensor local = confusion_sum.to(at::kCPU).contiguous();
    const std::vector<double> cells = coordinator_.sum(
        std::vector<double>(local.data_ptr<std::int64_t>(), local.data_ptr<std::int64_t>() + local.numel()));
    *confusion = at::tensor(cells, at::kDouble).to(at::kLong).view(local.sizes());
  }
  Evaluation eval;
  eval.samples = static_cast<std::int64_t>(sums[3]);
  eval.top_k = top_k > 0 ? static_cast<int>(top_k) : 5;
  if (sums[3] > 0) {
    eval.loss = sums[0] / sums[3];
    eval.top1 = sums[1] / sums[3];
    eval.top_k_accuracy = sums[2] / sums[3];
  }
  return eval;
}

}  // namespace mixt
