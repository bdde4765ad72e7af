#include "distributed/gradient_reduce_scatter.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
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
  if (pending_[bucket] == 0) return;
  if (armed_) {
    if (--pending_[bucket] == 0) start_ready_locked();
  } else if (--pending_[bucket] == 0 && on_bucket_taken_) {
    on_bucket_taken_(bucket);  // an earlier micro-batch's: its gradients stay until the last
  }
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
  // In the shards' dtype: float32 shards of a reduced-precision model reduce in float32.
  const at::TensorOptions options = layout_.entries()[members.front()].shard.options();
  if (members.size() == 1 && world * numel * static_cast<std::int64_t>(options.dtype().itemsize()) >
                                 layout_.bucket_bytes()) {
    reduce_in_pieces_locked(bucket);
    return;
  }
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
  if (on_bucket_taken_) on_bucket_taken_(bucket);
  at::Tensor flat_input = flight.input.view({-1});
  flight.work = communicator_.start_reduce_scatter_sum(
      flight.output, flat_input, "gradient reduce_scatter (bucket " + std::to_string(bucket) + ")");
  if (in_flight_) finish_locked(*in_flight_);
  in_flight_ = std::move(flight);
}

void GradientReduceScatter::reduce_in_pieces_locked(std::size_t bucket) {
  if (in_flight_) finish_locked(*in_flight_);
  in_flight_.reset();
  ShardLayout::Entry& entry = layout_.entries()[layout_.buckets()[bucket].front()];
  const at::Tensor grad = entry.full.grad();
  entry.full.mutable_grad() = at::Tensor();
  if (on_bucket_taken_) on_bucket_taken_(bucket);
  if (!grad.defined()) {
    // Every rank issues the same collectives: this one's part is zeros.
    InFlight zeros{bucket,
                   at::zeros({layout_.world_size(), entry.shard_numel}, entry.shard.options()),
                   at::empty({entry.shard_numel}, entry.shard.options()),
                   {},
                   {false}};
    at::Tensor flat_input = zeros.input.view({-1});
    zeros.work = communicator_.start_reduce_scatter_sum(zeros.output, flat_input, "gradient reduce_scatter");
    finish_locked(zeros);
    return;
  }
  const int world = layout_.world_size();
  const std::int64_t rows = entry.full.dim() == 0 ? 1 : entry.full.size(0);
  const std::int64_t row_numel = rows == 0 ? 0 : entry.full.numel() / rows;
  const std::int64_t chunk_rows = row_numel == 0 ? 0 : entry.shard_numel / row_numel;
  const std::int64_t piece_rows = std::max<std::int64_t>(
      1, layout_.bucket_bytes() / (world * row_numel * static_cast<std::int64_t>(entry.shard.element_size())));
  const at::Tensor grad_rows = grad.reshape({rows, row_numel});
  at::Tensor output = at::empty({entry.shard_numel}, entry.shard.options());
  for (std::int64_t first = 0; first < chunk_rows; first += piece_rows) {
    const std::int64_t count = std::min(piece_rows, chunk_rows - first);
    // Row r: rank r's rows first .. first + count of its chunk, zeros past the tensor's end.
    at::Tensor input = at::zeros({world, count, row_numel}, entry.shard.options());
    for (int r = 0; r < world; ++r) {
      const std::int64_t from = r * chunk_rows + first;
      const std::int64_t present = std::clamp<std::int64_t>(rows - from, 0, count);
      if (present > 0) input[r].narrow(0, 0, present).copy_(grad_rows.narrow(0, from, present));
    }
    at::Tensor flat_input = input.view({-1});
    at::Tensor piece = output.narrow(0, first * row_numel, count * row_numel);
    communicator_.wait(communicator_.start_reduce_scatter_sum(piece, flat_input, "gradient reduce_scatter"),
                       "gradient reduce_scatter (bucket " + std::to_string(bucket) + ")");
  }
  output.div_(world);
  entry.shard.mutable_grad() = output.view(entry.shard.sizes());
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
