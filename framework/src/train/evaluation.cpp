// The evaluation after each epoch (and `mixt evaluate`'s): loss, top-1 and top-k over
// data.val, summed over ranks, and the confusion matrix when asked for.
#include <algorithm>

#include "mixt/padded_shards.h"
#include "train/accuracy.h"
#include "train/confusion_matrix.h"
#include "common/interrupt.h"
#include "train/trainer.h"

namespace mixt {

std::vector<std::string> Trainer::other_weights() const {
  std::vector<std::string> names;
  for (const NamedCallback& c : callbacks_) {
    std::string weights;
    c.guarded("evaluated_weights", [&] { weights = c.callback->evaluated_weights(); });
    if (!weights.empty()) names.push_back(std::move(weights));
  }
  return names;
}

Evaluation Trainer::evaluate_with_callbacks(Dataset& dataset, const std::string& weights) {
  notify("on_evaluation_start", [&](Callback& callback) { callback.on_evaluation_start(state_, weights); });
  // Each rank evaluates its shard with the weights it swapped in: they must be the same.
  if (!weights.empty()) {
    coordinator_.check_in_sync(
        *components_.model,
        "with the " + weights + " weights in for their evaluation after epoch " + std::to_string(state_.epoch + 1),
        "a callback's evaluated weights must be the same on every rank: derive them from "
        "the synchronised weights only (not from rank-local data)");
  }
  Evaluation eval = evaluate(dataset);
  eval.weights = weights;
  notify("on_evaluation_end", [&](Callback& callback) { callback.on_evaluation_end(state_, eval); });
  return eval;
}

Evaluation Trainer::evaluate(Dataset& dataset, at::Tensor* confusion) {
  Model& model = *components_.model;
  model.eval();
  at::NoGradGuard no_grad;
  dataset.start_epoch(0);
  at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(components_.device));
  at::Tensor correct = at::zeros({2}, at::TensorOptions().dtype(at::kLong).device(components_.device));  // top-1, top-k
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
    const at::Tensor inputs = to_device(batch->inputs);
    const at::Tensor targets = batch->targets.to(components_.device, true);
    AutocastScope scope = components_.precision->autocast(components_.device.type());
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
    eval.top5 = sums[2] / sums[3];
  }
  return eval;
}

}  // namespace mixt
