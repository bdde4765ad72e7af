// mixt/dataset.h — the dataset interface.
//
// A dataset delivers an epoch as a sequence of batches. The order of an epoch must depend
// only on the seed, the epoch and the shard, never on timing: that is what makes runs
// reproducible and resumable mid-epoch.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mixt {

struct Batch {
  at::Tensor inputs;   // float, N x C x H x W (or whatever the model expects)
  at::Tensor targets;  // int64 class indices, N
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual std::int64_t size() const = 0;                      // samples in this shard
  virtual std::int64_t num_classes() const = 0;
  virtual std::vector<std::int64_t> sample_shape() const = 0;  // one input, e.g. {1, 28, 28}
  virtual std::int64_t batches_per_epoch() const = 0;

  // Starts epoch `epoch` (0-based): reshuffles if the dataset shuffles.
  virtual void start_epoch(std::int64_t epoch) = 0;
  // The next batch of the current epoch, or nothing when the epoch is over.
  virtual std::optional<Batch> next_batch() = 0;
};

struct DatasetContext {
  std::string split;           // the key under `data:` ("train", "val")
  std::uint64_t seed = 0;      // trainer.seed
  std::int64_t rank = 0;       // shard of this process
  std::int64_t world_size = 1;
  at::Device device = at::kCPU;
};

}  // namespace mixt
