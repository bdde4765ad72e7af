// How the tensors an optimizer updates are split over the ranks of a sharded run
// (trainer.distributed.sharding), and the collectives that move between the two forms.
//
// Each tensor is cut along its first dimension into world-size chunks of
// ceil(rows / world) rows, as FSDP2's Shard(0) does, the last padded with zero rows: rank r
// keeps chunk r as its own tensor (its "shard"), whose shape keeps the tensor's
// dimensionality, so an optimizer that treats 1-D tensors apart (no weight decay on biases)
// treats shards the same way. Chunk r of the flattened tensor is contiguous, so a bucket of
// tensors becomes one [world, sum of shard sizes] buffer: one reduce-scatter or all-gather a
// bucket (Gloo refuses uneven shards: the padding makes them even).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "distributed/process_group.h"

namespace mixt::distributed {

// Each rank's chunk of a tensor of `sizes` over `world_size` ranks: ceil(rows / world_size)
// rows, the rest of the shape kept (a tensor without dimensions is one row).
std::vector<std::int64_t> chunk_shape(at::IntArrayRef sizes, int world_size);

class ShardLayout {
 public:
  using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

  // `full`: the optimizer's tensors by name (the model's parameters, or a policy's masters).
  // Buckets hold tensors of one dtype and device whose padded size together is at most
  // `bucket_bytes` (a larger tensor has a bucket of its own): what one collective moves.
  // `groups` (empty, or one label a tensor): a bucket holds neighbours of one label only.
  // `shard_dtype`: the shards' (and their gradients') dtype when not the full tensors' own:
  // float32 shards of a bfloat16 model keep a master-weight policy's masters (gathered in
  // the model's dtype, gradients reduced in float32, as FSDP2's param_dtype/reduce_dtype).
  ShardLayout(const NamedTensors& full, int rank, int world_size, std::int64_t bucket_bytes,
              const std::vector<int>& groups = {}, at::ScalarType shard_dtype = at::ScalarType::Undefined);

  // This rank's shards, by the full tensors' names: what the optimizer is built over.
  NamedTensors named_shards() const;
  // Each shard set from its full tensor (the same on every rank before training).
  void copy_full_into_shards();
  // Entry `index`'s shard set from `whole`, a tensor of its full shape (a checkpoint's).
  void cut_into_shard(std::size_t index, const at::Tensor& whole);
  // This rank's chunk of `whole` (entry `index`'s full shape) as a new tensor of the shard's
  // shape in `whole`'s dtype and device, zero rows past the end.
  at::Tensor chunk_of(std::size_t index, const at::Tensor& whole) const;
  // Every rank's shards, whole, in the shards' dtype (a master-weight policy's masters for a
  // checkpoint): one all-gather a bucket, into new tensors.
  NamedTensors gather_shards_whole(const ProcessGroupCommunicator& communicator) const;
  // Every rank's `chunks` whole, as new tensors in each chunk's dtype and device: chunks[k]
  // is shaped as entry entries[k]'s shard (a copy a callback keeps of it). One all-gather per
  // run of same-dtype chunks up to bucket_bytes(); every rank calls it with the same entries.
  std::vector<at::Tensor> gather_whole(const std::vector<std::size_t>& entries, const std::vector<at::Tensor>& chunks,
                                       const ProcessGroupCommunicator& communicator, const std::string& what) const;

  // The full tensors' gradients, averaged already, cut to this rank's chunk (no collective).
  void slice_gradients();
  // Every rank's shards into the full tensors (one all-gather a bucket).
  void all_gather_into_full(const ProcessGroupCommunicator& communicator);
  // Every rank's shards of these entries into their full tensors, in one all-gather,
  // written past autograd's version counters: the gather of sharding: parameters, which
  // refills weights that a pending backward has saved.
  void all_gather_entries(const std::vector<std::size_t>& entries, const ProcessGroupCommunicator& communicator,
                          const std::string& what);
  // The same in two halves, so that other work runs while the collective moves the shards
  // (sharding: parameters' prefetch): started here, written into the full tensors (whose
  // storage must be there by then) by finish_all_gather.
  struct PendingGather {
    std::vector<std::size_t> entries;
    at::Tensor input, output;
    c10::intrusive_ptr<c10d::Work> work;
    std::string what;
  };
  PendingGather start_all_gather_entries(const std::vector<std::size_t>& entries,
                                         const ProcessGroupCommunicator& communicator, const std::string& what);
  void finish_all_gather(PendingGather& pending, const ProcessGroupCommunicator& communicator);
  // Drops the full tensors' gradients (zero_grad).
  void drop_full_gradients();

  // What a checkpoint records, so that a resume can check it fits: the world size and each
  // tensor's name, shape and the dtype its shards (the optimizer's state) have, one line each.
  std::string describe() const;
  int world_size() const { return world_size_; }
  std::int64_t bucket_bytes() const { return bucket_bytes_; }
  int rank() const { return rank_; }
  // Bytes of this rank's shards (for the start-up line).
  std::int64_t shard_bytes() const;
  std::int64_t full_bytes() const;

  struct Entry {
    std::string name;
    at::Tensor full;
    at::Tensor shard;
    std::int64_t shard_numel = 0;  // chunk rows x elements a row
  };
  const std::vector<Entry>& entries() const { return entries_; }
  std::vector<Entry>& entries() { return entries_; }
  // Indices into entries(), a bucket each, in reverse registration order (roughly the order
  // backward produces the gradients, as DDP's buckets).
  const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }
  std::int64_t bucket_numel(const std::vector<std::size_t>& bucket) const;

 private:
  // Where this rank's chunk of `entry`'s flattened tensor lies: [start, start + length).
  std::pair<std::int64_t, std::int64_t> own_range(const Entry& entry) const;

  int rank_;
  int world_size_;
  std::int64_t bucket_bytes_;
  std::vector<Entry> entries_;
  std::vector<std::vector<std::size_t>> buckets_;  // indices into entries_
};

}  // namespace mixt::distributed
