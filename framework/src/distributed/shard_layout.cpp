#include "distributed/shard_layout.h"

#include <algorithm>
#include <sstream>

#include "distributed/bucket_assigner.h"
#include "distributed/optimizer_resharding.h"

namespace mixt::distributed {

namespace {

std::int64_t rows_of(const at::Tensor& tensor) { return tensor.dim() == 0 ? 1 : tensor.size(0); }

}  // namespace

std::vector<std::int64_t> chunk_shape(at::IntArrayRef sizes, int world_size) {
  const std::int64_t rows = sizes.empty() ? 1 : sizes[0];
  std::vector<std::int64_t> shape{(rows + world_size - 1) / world_size};
  for (std::size_t d = 1; d < sizes.size(); ++d) shape.push_back(sizes[d]);
  return shape;
}

ShardLayout::ShardLayout(const NamedTensors& full, int rank, int world_size, std::int64_t bucket_bytes,
                         const std::vector<int>& groups, at::ScalarType shard_dtype)
    : rank_(rank), world_size_(world_size), bucket_bytes_(bucket_bytes) {
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : full) {
    const std::int64_t rows = rows_of(tensor);
    const std::vector<std::int64_t> shape = chunk_shape(tensor.sizes(), world_size);
    const std::int64_t row_numel = rows == 0 ? 0 : tensor.numel() / rows;
    const at::TensorOptions options =
        shard_dtype == at::ScalarType::Undefined ? tensor.options() : tensor.options().dtype(shard_dtype);
    entries_.push_back({name, tensor, at::zeros(shape, options), shape[0] * row_numel});
  }
  BucketAssigner assigner(bucket_bytes);
  for (std::size_t i = entries_.size(); i-- > 0;) {
    const Entry& entry = entries_[i];
    if (!groups.empty() && i + 1 < entries_.size() && groups[i] != groups[i + 1]) assigner.close_all();
    const std::size_t bucket = assigner.assign(
        entry.full, world_size * entry.shard_numel * static_cast<std::int64_t>(entry.full.element_size()));
    if (bucket == buckets_.size()) buckets_.emplace_back();
    buckets_[bucket].push_back(i);
  }
}

ShardLayout::NamedTensors ShardLayout::named_shards() const {
  NamedTensors shards;
  for (const Entry& entry : entries_) shards.emplace_back(entry.name, entry.shard);
  return shards;
}

std::pair<std::int64_t, std::int64_t> ShardLayout::own_range(const Entry& entry) const {
  const std::int64_t start = std::min<std::int64_t>(rank_ * entry.shard_numel, entry.full.numel());
  const std::int64_t end = std::min<std::int64_t>(start + entry.shard_numel, entry.full.numel());
  return {start, end - start};
}

std::int64_t ShardLayout::bucket_numel(const std::vector<std::size_t>& bucket) const {
  std::int64_t numel = 0;
  for (const std::size_t i : bucket) numel += entries_[i].shard_numel;
  return numel;
}

void ShardLayout::copy_full_into_shards() {
  for (std::size_t i = 0; i < entries_.size(); ++i) cut_into_shard(i, entries_[i].full);
}

void ShardLayout::cut_into_shard(std::size_t index, const at::Tensor& whole) {
  at::NoGradGuard no_grad;
  entries_[index].shard.copy_(chunk_of(index, whole));
}

at::Tensor ShardLayout::chunk_of(std::size_t index, const at::Tensor& whole) const {
  at::NoGradGuard no_grad;
  const Entry& entry = entries_[index];
  const auto [start, length] = own_range(entry);
  at::Tensor chunk = at::zeros(entry.shard.sizes(), whole.options());
  if (length > 0) chunk.view({-1}).narrow(0, 0, length).copy_(whole.reshape({-1}).narrow(0, start, length));
  return chunk;
}

ShardLayout::NamedTensors ShardLayout::gather_shards_whole(const ProcessGroupCommunicator& communicator) const {
  std::vector<std::size_t> indices;
  std::vector<at::Tensor> shards;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    indices.push_back(i);
    shards.push_back(entries_[i].shard);
  }
  const std::vector<at::Tensor> whole =
      gather_whole(indices, shards, communicator, "shard all_gather for a checkpoint");
  NamedTensors named;
  for (std::size_t i = 0; i < entries_.size(); ++i) named.emplace_back(entries_[i].name, whole[i]);
  return named;
}

std::vector<at::Tensor> ShardLayout::gather_whole(const std::vector<std::size_t>& entries,
                                                  const std::vector<at::Tensor>& chunks,
                                                  const ProcessGroupCommunicator& communicator,
                                                  const std::string& what) const {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> whole(chunks.size());
  // [first, last): chunks of one dtype, at most bucket_bytes_ together (or one larger chunk).
  const auto gather_run = [&](std::size_t first, std::size_t last) {
    std::int64_t numel = 0;
    for (std::size_t k = first; k < last; ++k) numel += entries_[entries[k]].shard_numel;
    // On the collective's device (the shards'), whatever device a chunk is kept on.
    const at::TensorOptions options = chunks[first].options().device(entries_[entries[first]].shard.device());
    at::Tensor input = at::empty({numel}, options);
    std::int64_t column = 0;
    for (std::size_t k = first; k < last; ++k) {
      const Entry& entry = entries_[entries[k]];
      if (chunks[k].sizes() != entry.shard.sizes()) {
        throw std::invalid_argument(what + ": '" + entry.name + "' is not shaped as this rank's chunk of it");
      }
      input.narrow(0, column, entry.shard_numel).copy_(chunks[k].reshape({-1}));
      column += entry.shard_numel;
    }
    at::Tensor output = at::empty({world_size_ * numel}, options);
    communicator.wait(communicator.start_all_gather(output, input, what), what);
    const at::Tensor rows = output.view({world_size_, numel});
    column = 0;
    for (std::size_t k = first; k < last; ++k) {
      const Entry& entry = entries_[entries[k]];
      const at::Tensor gathered = rows.narrow(1, column, entry.shard_numel).reshape({-1});
      whole[k] = gathered.narrow(0, 0, entry.full.numel())
                     .view(entry.full.sizes())
                     .to(chunks[k].device(),
                         /*non_blocking=*/false,
                         /*copy=*/true);
      column += entry.shard_numel;
    }
  };
  std::size_t first = 0;
  std::int64_t bytes = 0;
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const std::int64_t chunk_bytes = static_cast<std::int64_t>(chunks[k].nbytes());
    if (k > first && (chunks[k].scalar_type() != chunks[first].scalar_type() || bytes + chunk_bytes > bucket_bytes_)) {
      gather_run(first, k);
      first = k;
      bytes = 0;
    }
    bytes += chunk_bytes;
  }
  if (first < chunks.size()) gather_run(first, chunks.size());
  return whole;
}

void ShardLayout::slice_gradients() {
  at::NoGradGuard no_grad;
  for (Entry& entry : entries_) {
    const at::Tensor grad = entry.full.grad();
    entry.full.mutable_grad() = at::Tensor();
    if (!grad.defined()) {
      entry.shard.mutable_grad() = at::Tensor();
      continue;
    }
    const auto [start, length] = own_range(entry);
    at::Tensor shard_grad = at::zeros_like(entry.shard);
    if (length > 0) shard_grad.view({-1}).narrow(0, 0, length).copy_(grad.reshape({-1}).narrow(0, start, length));
    entry.shard.mutable_grad() = shard_grad;
  }
}

void ShardLayout::all_gather_into_full(const ProcessGroupCommunicator& communicator) {
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    all_gather_entries(buckets_[b], communicator, "parameter all_gather (bucket " + std::to_string(b) + ")");
  }
}

void ShardLayout::all_gather_entries(const std::vector<std::size_t>& indices,
                                     const ProcessGroupCommunicator& communicator, const std::string& what) {
  if (indices.empty()) return;
  PendingGather pending = start_all_gather_entries(indices, communicator, what);
  finish_all_gather(pending, communicator);
}

ShardLayout::PendingGather ShardLayout::start_all_gather_entries(const std::vector<std::size_t>& indices,
                                                                 const ProcessGroupCommunicator& communicator,
                                                                 const std::string& what) {
  at::NoGradGuard no_grad;
  PendingGather pending{indices, {}, {}, {}, what};
  const std::int64_t numel = bucket_numel(indices);
  const at::TensorOptions options = entries_[indices.front()].full.options();
  pending.input = at::empty({numel}, options);
  std::int64_t column = 0;
  for (const std::size_t i : indices) {
    pending.input.narrow(0, column, entries_[i].shard_numel).copy_(entries_[i].shard.reshape({-1}));
    column += entries_[i].shard_numel;
  }
  pending.output = at::empty({world_size_ * numel}, options);
  pending.work = communicator.start_all_gather(pending.output, pending.input, what);
  return pending;
}

void ShardLayout::finish_all_gather(PendingGather& pending, const ProcessGroupCommunicator& communicator) {
  at::NoGradGuard no_grad;
  communicator.wait(pending.work, pending.what);
  const std::vector<std::size_t>& indices = pending.entries;
  const std::int64_t numel = pending.input.numel();
  const at::Tensor rows = pending.output.view({world_size_, numel});
  std::int64_t column = 0;
  for (const std::size_t i : indices) {
    Entry& entry = entries_[i];
    const at::Tensor gathered = rows.narrow(1, column, entry.shard_numel).reshape({-1});
    // variable_data(): the same storage under a version counter of its own.
    entry.full.variable_data().copy_(gathered.narrow(0, 0, entry.full.numel()).view(entry.full.sizes()));
    column += entry.shard_numel;
  }
}

void ShardLayout::drop_full_gradients() {
  for (Entry& entry : entries_) entry.full.mutable_grad() = at::Tensor();
}

std::string ShardLayout::describe() const {
  std::ostringstream text;
  text << "world_size " << world_size_ << "\n";
  for (const Entry& entry : entries_) {
    text << describe_tensor(entry.name, entry.full.sizes(), entry.shard.scalar_type()) << "\n";
  }
  return text.str();
}

std::int64_t ShardLayout::shard_bytes() const {
  std::int64_t bytes = 0;
  for (const Entry& entry : entries_)
    bytes += entry.shard.numel() * static_cast<std::int64_t>(entry.shard.element_size());
  return bytes;
}

std::int64_t ShardLayout::full_bytes() const {
  std::int64_t bytes = 0;
  for (const Entry& entry : entries_)
    bytes += entry.full.numel() * static_cast<std::int64_t>(entry.full.element_size());
  return bytes;
}

}  // namespace mixt::distributed
