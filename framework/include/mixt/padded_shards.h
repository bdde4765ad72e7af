// mixt/padded_shards.h — an optional dataset capability, for evaluations summed over ranks.
//
// Sharded as torch's DistributedSampler (drop_last=False) shards, every rank serves
// ceil(N / world_size) samples, and the last sample of some ranks repeats one from the
// start of the data: an evaluation summed over ranks would count those twice. A dataset
// that says how many of the samples it serves are its own (the first ones, in the order it
// serves them; DatasetCapabilities::pads_shards) is evaluated exactly: the trainer counts those and no more. The built-in
// loader (mixt::LoaderDataset) and fashion_mnist say it; a dataset that does not is
// evaluated as it serves.
#pragma once

#include <cstdint>

#include "mixt/dataset.h"

namespace mixt {

class PadsShards {
 public:
  virtual ~PadsShards() = default;
  // How many of the size() samples this shard serves per epoch, the first ones, are its own.
  virtual std::int64_t own_samples() const = 0;
};

// DistributedSampler's rule: of `total` samples over `world_size` ranks, rank `rank` has
// ceil((total - rank) / world_size) of its own (its shard interleaves ranks, and the
// positions past `total` wrap around to the start).
inline std::int64_t distributed_sampler_own_samples(std::int64_t total, std::int64_t rank,
                                                    std::int64_t world_size) {
  return total > rank ? (total - rank + world_size - 1) / world_size : 0;
}

// The dataset's own samples per epoch, or size() when it does not say.
std::int64_t own_samples_of(Dataset& dataset);

}  // namespace mixt
