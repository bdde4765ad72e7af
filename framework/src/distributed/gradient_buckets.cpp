#include "distributed/gradient_buckets.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

#include "distributed/bucket_assigner.h"

namespace mixt::distributed {

namespace {

struct BucketHook final : torch::autograd::PostAccumulateGradHook {
  BucketHook(GradientBuckets* owner, std::size_t bucket) : owner(owner), bucket(bucket) {}
  void operator()(const torch::autograd::Variable&) override { owner->on_gradient_ready(bucket); }
  GradientBuckets* owner;
  std::size_t bucket;
};

at::Tensor flatten(const std::vector<at::Tensor>& bucket) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> pieces;
  pieces.reserve(bucket.size());
  for (const at::Tensor& p : bucket) {
    const at::Tensor& grad = p.grad();
    pieces.push_back(grad.defined() ? grad.reshape({-1}) : at::zeros({p.numel()}, p.options()));
  }
  return at::cat(pieces);
}

}  // namespace

GradientBuckets::GradientBuckets(const std::vector<at::Tensor>& parameters, std::int64_t bucket_bytes) {
  BucketAssigner assigner(bucket_bytes);
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    const at::Tensor& p = *it;
    if (!p.requires_grad()) continue;
    const std::size_t bucket = assigner.assign(p, p.numel() * static_cast<std::int64_t>(p.element_size()));
    if (bucket == buckets_.size()) buckets_.emplace_back();
    buckets_[bucket].push_back(p);
  }
  reset_locked();
}

GradientBuckets::~GradientBuckets() {
  if (!overlap_) return;
  for (const auto& bucket : buckets_) {
    for (const at::Tensor& p : bucket) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  }
}

void GradientBuckets::enable_overlap(const ProcessGroupCommunicator& communicator) {
  overlap_ = &communicator;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (const at::Tensor& p : buckets_[b]) {
      torch::autograd::impl::set_post_acc_grad_hooks(p, std::make_unique<BucketHook>(this, b));
    }
  }
}

void GradientBuckets::reset_locked() {
  armed_ = false;
  pending_.assign(buckets_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size();
  next_ = 0;
  flats_.assign(buckets_.size(), at::Tensor());
  works_.assign(buckets_.size(), c10::intrusive_ptr<c10d::Work>());
}

void GradientBuckets::prepare_backward(bool last) {
  std::lock_guard<std::mutex> lock(mutex_);
  reset_locked();
  armed_ = last && overlap_ != nullptr;
  started_during_backward_ = 0;
}

void GradientBuckets::on_gradient_ready(std::size_t bucket) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || pending_[bucket] == 0) return;
  if (--pending_[bucket] == 0) start_ready_locked();
}

void GradientBuckets::start_ready_locked() {
  while (next_ < buckets_.size() && pending_[next_] == 0) {
    start_locked(next_++, *overlap_);
    ++started_during_backward_;
  }
}

void GradientBuckets::start_locked(std::size_t bucket, const ProcessGroupCommunicator& communicator) {
  flats_[bucket] = flatten(buckets_[bucket]);
  works_[bucket] = communicator.start_sum(flats_[bucket]);
}

void GradientBuckets::average(const ProcessGroupCommunicator& communicator) {
  std::lock_guard<std::mutex> lock(mutex_);
  at::NoGradGuard no_grad;
  armed_ = false;
  for (; next_ < buckets_.size(); ++next_) start_locked(next_, communicator);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    communicator.wait(works_[b], "gradient all_reduce (bucket " + std::to_string(b) + ")");
    at::Tensor& flat = flats_[b];
    flat.div_(communicator.world_size());
    std::int64_t offset = 0;
    for (const at::Tensor& p : buckets_[b]) {
      at::Tensor grad = p.grad();
      if (grad.defined()) grad.copy_(flat.narrow(0, offset, p.numel()).view_as(grad));
      offset += p.numel();
    }
  }
  const std::size_t started = started_during_backward_;
  reset_locked();
  started_during_backward_ = started;
}

}  // namespace mixt::distributed
