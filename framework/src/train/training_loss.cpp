#include "train/training_loss.h"

#include <string>

#include "common/optimizer_shards.h"
#include "mixt/error.h"
#include "mixt/helpers/fp32_modules.h"
#include "mixt/helpers/linear.h"
#include "train/out_of_memory.h"
#include "train/packed_forward.h"

namespace mixt {

namespace {
// LibTorch's message alone ("Expected more than 1 value per channel when training") does
// not say which batch, nor what to change in the recipe.
[[noreturn]] void forward_failed(const c10::Error& e, std::int64_t epoch, std::int64_t step,
                                 const at::Tensor& inputs) {
  const std::string what = e.what_without_backtrace();
  std::string hint;
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) hint = kOutOfMemoryHint;
  if (inputs.size(0) == 1 && what.find("more than 1 value per channel when training") != std::string::npos) {
    hint = "batch norm needs two or more samples per training batch: a batch of one is the epoch's last when the "
           "dataset size leaves one over (or the rest of its samples were skipped as bad); set "
           "data.train.drop_last: true";
  }
  throw Error(ErrorKind::runtime,
              "epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(step + 1) +
                  ": training forward pass on a batch of shape " + c10::str(inputs.sizes()) + " failed: " + what,
              {}, {}, hint);
}
// The task's fused head loss, when the model offers its head and nothing else computes that
// head: a float8 policy's LinearFunction on it would be bypassed, so the plain path stays.
const HeadLoss* fused_head_loss(const Components& c) {
  const auto* loss = dynamic_cast<const HeadLoss*>(c.task.get());
  auto* model = dynamic_cast<LinearHead*>(c.model.get());
  if (loss == nullptr || model == nullptr || !loss->fuses_head()) return nullptr;
  // The layers' maps are views of their weights: whole while they are listed (a no-op when
  // the trainer decided before releasing them).
  const WholeModel whole(c.optimizer_shards);
  const HeadMap head = model->head();
  for (const LinearLayer& layer : linear_layers(*c.model)) {
    if (layer.weight.is_same(head.weight) && layer.owner->linear_function(layer.map)) return nullptr;
  }
  return loss;
}
}  // namespace

at::Tensor TrainingLoss::head_loss(const HeadLoss& task, const at::Tensor& inputs, const at::Tensor& targets) const {
  auto& model = dynamic_cast<LinearHead&>(*components_.model);
  const at::Tensor features = features_batch(components_, inputs, packed_positions(components_, targets));
  const HeadMap head = model.head();
  if (!keeps_in_fp32(*components_.model, head.name)) return task.head_loss(features, head, targets);
  // precision.fp32_modules names the head: as call_submodule would run it.
  FullPrecisionScope full_precision(features.device().type());
  const bool reduced = features.scalar_type() == at::kHalf || features.scalar_type() == at::kBFloat16;
  return task.head_loss(reduced ? features.to(at::kFloat) : features, head, targets);
}

void TrainingLoss::decide_path() const {
  if (fused_decided_) return;
  fused_ = fused_head_loss(components_);
  fused_decided_ = true;
}

at::Tensor TrainingLoss::operator()(const at::Tensor& inputs, const at::Tensor& targets, std::int64_t epoch,
                                    std::int64_t step) const {
  try {
    AutocastScope scope = components_.precision->autocast(facts_.device.type());
    decide_path();
    at::Tensor loss = fused_ ? head_loss(*fused_, inputs, targets)
                             : components_.task->loss(
                                   forward_batch(components_, inputs, packed_positions(components_, targets)), targets);
    // Only when accumulating: dividing by 1 is exact but costs a kernel and a backward node.
    if (accumulate_ > 1) loss = loss / static_cast<double>(accumulate_);
    return loss;
  } catch (const c10::Error& e) {
    forward_failed(e, epoch, step, inputs);
  }
}

}  // namespace mixt
