#include "distributed/gradient_reduce_scatter.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <string>

namespace mixt::distributed {

namespace {

struct ReduceHook final : torch::autograd::PostAccumulateGradHook {
  ReduceHook(GradientReduceScatter* owner, std::size_t bucket) : owner(owner), bucket(bucket) {}
  void operator()(const torch::autograd::Variable&) override { owner->on_gradient_ready(bucket); }
  GradientReduceScatter* owner;
  std::size_t bucket;
};

// `tensor` flattened (logical order, whatever its memory format) and zero-padded to `numel`.
at::Tensor padded_flat(const at::Tensor& tensor, std::int64_t numel) {
  const at::Tensor flat = tensor.reshape({-1});
  if (flat.numel() == numel) return flat;
  at::Tensor padded = at::zeros({numel}, flat.options());
  padded.narrow(0, 0, flat.numel()).copy_(flat);
  return padded;
}

}  // namespace

GradientReduceScatter::GradientReduceScatter(ShardLayout& layout, const ProcessGroupCommunicator& communicator)
    : layout_(layout), communicator_(communicator) {
  hooked_ = !layout_.entries().empty();
  for (const auto& entry : layout_.entries()) hooked_ = hooked_ && entry.full.requires_grad() && entry.full.is_leaf();
  if (hooked_) {
    for (std::size_t b = 0; b < layout_.buckets().size(); ++b) {
      for (const std::size_t i : layout_.buckets()[b]) {
        torch::autograd::impl::set_post_acc_grad_hooks(layout_.entries()[i].full,
                                                       std::make_unique<ReduceHook>(this, b));
      }
    }
  }
  reset_locked();
}

GradientReduceScatter::~GradientReduceScatter() {
  if (!hooked_) return;
  for (const auto& entry : layout_.entries()) torch::autograd::impl::set_post_acc_grad_hooks(entry.full, nullptr);
}

void GradientReduceScatter::reset_locked() {
  armed_ = false;
  pending_.clear();
  for (const auto& bucket : layout_.buckets()) pending_.push_back(bucket.size());
  next_ = 0;
}

void GradientReduceScatter::prepare_backward(bool last) {
  std::lock_guard<std::mutex> lock(mutex_);
  reset_locked();
  armed_ = last && hooked_;
}

void GradientReduceScatter::on_gradient_ready(std::size_t bucket) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || pending_[bucket] == 0) return;
  if (--pending_[bucket] == 0) start_ready_locked();
}

void GradientReduceScatter::start_ready_locked() {
  while (next_ < pending_.size() && pending_[next_] == 0) start_locked(next_++);
}

// Copies the bucket's gradients into one rank-major buffer (row r: every tensor's chunk r),
// drops them, starts the reduce-scatter, then finishes the one before: two in flight at most.
void GradientReduceScatter::start_locked(std::size_t bucket) {
  at::NoGradGuard no_grad;
  const std::vector<std::size_t>& members = layout_.buckets()[bucket];
  const int world = layout_.world_size();
  const std::int64_t numel = layout_.bucket_numel(members);
  const at::TensorOptions options = layout_.entries()[members.front()].full.options();
  InFlight flight{bucket, at::empty({world, numel}, options), at::empty({numel}, options), {}, {}};
  std::int64_t column = 0;
  for (const std::size_t i : members) {
    const ShardLayout::Entry& entry = layout_.entries()[i];
    const at::Tensor grad = entry.full.grad();
    at::Tensor part = flight.input.narrow(1, column, entry.shard_numel);
    if (grad.defined()) {
      part.copy_(padded_flat(grad, world * entry.shard_numel).view({world, entry.shard_numel}));
    } else {
      part.zero_();
    }
    flight.had_gradient.push_back(grad.defined());
    entry.full.mutable_grad() = at::Tensor();
    column += entry.shard_numel;
  }
  at::Tensor flat_input = flight.input.view({-1});
  flight.work = communicator_.start_reduce_scatter_sum(
      flight.output, flat_input, "gradient reduce_scatter (bucket " + std::to_string(bucket) + ")");
  if (in_flight_) finish_locked(*in_flight_);
  in_flight_ = std::move(flight);
}

void GradientReduceScatter::finish_locked(InFlight& flight) {
  communicator_.wait(flight.work, "gradient reduce_scatter (bucket " + std::to_string(flight.bucket) + ")");
  at::NoGradGuard no_grad;
  flight.output.div_(layout_.world_size());
  std::int64_t column = 0;
  const std::vector<std::size_t>& members = layout_.buckets()[flight.bucket];
  for (std::size_t k = 0; k < members.size(); ++k) {
    ShardLayout::Entry& entry = layout_.entries()[members[k]];
    entry.shard.mutable_grad() = flight.had_gradient[k]
                                     ? flight.output.narrow(0, column, entry.shard_numel).view(entry.shard.sizes())
                                     : at::Tensor();
    column += entry.shard_numel;
  }
  flight.input = at::Tensor();
}

void GradientReduceScatter::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
  while (next_ < pending_.size()) start_locked(next_++);
  if (in_flight_) finish_locked(*in_flight_);
  in_flight_.reset();
  reset_locked();
}

}  // namespace mixt::distributed
