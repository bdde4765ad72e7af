#include "train/training_loss.h"

#include <string>

#include "mixt/error.h"
#include "train/out_of_memory.h"

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
}  // namespace

at::Tensor TrainingLoss::operator()(const at::Tensor& inputs, const at::Tensor& targets, std::int64_t epoch,
                                    std::int64_t step) const {
  try {
    AutocastScope scope = components_.precision->autocast(components_.device.type());
    const at::Tensor logits = components_.model->forward(inputs);
    at::Tensor loss = components_.task->loss(logits, targets);
    // Only when accumulating: dividing by 1 is exact but costs a kernel and a backward node.
    if (accumulate_ > 1) loss = loss / static_cast<double>(accumulate_);
    return loss;
  } catch (const c10::Error& e) {
    forward_failed(e, epoch, step, inputs);
  }
}

}  // namespace mixt
