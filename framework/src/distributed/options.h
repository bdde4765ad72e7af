// The `trainer.distributed:` section of a recipe. Read (and checked) in every run, so that a
// recipe is valid or invalid whether or not it is launched by torchrun; used only when it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixt/config.h"
#include "mixt/plugin.h"

namespace mixt::distributed {

// trainer.distributed.sharding: what each rank keeps 1/N of (distributed/sharded_optimizer.h).
enum class Sharding { none, optimizer, gradients, parameters };
const char* sharding_name(Sharding mode);
// Whether the gradients are reduce-scattered (each rank keeps only its shard's).
inline bool reduce_scatters_gradients(Sharding mode) {
  return mode == Sharding::gradients || mode == Sharding::parameters;
}

struct DistributedOptions {
  std::string backend = "auto";  // auto (NCCL on CUDA, Gloo on CPU) | nccl | gloo
  double timeout_seconds = 600;  // a collective or the store waits at most this long
  double bucket_mb = 25;         // gradient all-reduce bucket size, as DDP's bucket_cap_mb
  bool overlap = false;          // start a bucket's all-reduce during backward (gradient hooks)
  bool sync_batchnorm = false;   // mixt::BatchNorm layers take global batch statistics
  Sharding sharding = Sharding::none;
  bool prefetch = true;  // sharding: parameters gathers the next block while one computes

  static DistributedOptions read(const Config& section);
  // The keys read() reads, with the defaults above, for `mixt describe trainer`.
  static std::vector<OptionDoc> docs();
};

}  // namespace mixt::distributed
