// What the trainer and the checkpointer ask of an optimizer whose state is split over the
// ranks (trainer.distributed.sharding: optimizer | gradients; distributed/sharded_optimizer.h).
// Components::optimizer_shards is null otherwise, and then nothing of this runs.
#pragma once

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <string>

namespace mixt {

class OptimizerShards {
 public:
  virtual ~OptimizerShards() = default;

  // Before the first step (after any resume and the ranks' broadcast): each shard from the
  // full tensor it is cut from.
  virtual void start_from_full() = 0;
  // sharding: parameters keeps each block's weights unallocated outside its forward and
  // backward: whatever reads the whole model between steps (the epoch's checksum and
  // checkpoint) holds it gathered in between (WholeModel). Nothing to do in other modes.
  virtual void gather_whole_model() {}
  virtual void release_whole_model() {}
  // A line for the run's log after training (sharding: parameters: how many blocks were
  // whole at once); empty when there is nothing to say.
  virtual std::string report() const { return {}; }
  // Before each backward: `last` for the optimizer step's last micro-batch, whose backward
  // may reduce the gradients as they come (distributed/gradient_reduce_scatter.h).
  virtual void prepare_backward(bool last) = 0;
  // After the precision policy's gradients_ready(): the full gradients become this rank's
  // shards' gradients (reduce-scattered, or cut from the averaged ones) and are dropped.
  virtual void take_gradients() = 0;
  // The norm of every rank's shard gradients together, from this rank's (one all-reduce).
  virtual at::Tensor norm_over_ranks(const at::Tensor& local_norm) const = 0;
  // This rank's optimizer state, written beside the checkpoint `file` rank 0 writes; and
  // read back from there on resume. Every rank calls them.
  virtual void save_shard(const std::filesystem::path& file) = 0;
  virtual void load_shard(const std::filesystem::path& file) = 0;
  // sharding: parameters keeping a master-weight policy's masters as float32 shards
  // (MasterWeights::keep_on_shards): the whole masters into the precision policy's checkpoint
  // state as "master_weights", where the policy would have written them (rank 0, after every
  // rank's save_shard(), which gathers them); and each rank's shards cut from them on resume.
  // Nothing to do otherwise.
  virtual void save_masters(torch::serialize::OutputArchive& /*precision*/) const {}
  virtual void load_masters(torch::serialize::InputArchive& /*precision*/) {}
};

// The whole model on every rank for the scope's life (nested scopes count); `shards` may be
// null (no sharding).
class WholeModel {
 public:
  explicit WholeModel(OptimizerShards* shards) : shards_(shards) {
    if (shards_) shards_->gather_whole_model();
  }
  ~WholeModel() {
    if (shards_) shards_->release_whole_model();
  }
  WholeModel(const WholeModel&) = delete;
  WholeModel& operator=(const WholeModel&) = delete;

 private:
  OptimizerShards* shards_;
};

// The key of a sharded run's entry in a checkpoint's optimizer archive (in place of the
// optimizer's own state): what the shards fit, as text.
inline constexpr const char* kShardedOptimizerKey = "sharded_optimizer";

// Where rank `rank` of `world_size` keeps its optimizer state for checkpoint `file`.
inline std::filesystem::path optimizer_shard_file(const std::filesystem::path& file, int rank, int world_size) {
  return file.string() + ".optimizer-" + std::to_string(rank) + "-of-" + std::to_string(world_size);
}

}  // namespace mixt
