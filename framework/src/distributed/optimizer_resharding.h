// Optimizer state written by N ranks of a sharded run (trainer.distributed.sharding), read
// back by M ranks, or by one process whose optimizer is whole — and whole state read by
// sharded ranks. Each tensor's state is cut as ShardLayout cuts the tensor (chunks of
// ceil(rows / world) rows, the last padded with zeros), so a rank's new chunk is copied from
// the one or few old chunks it overlaps, reading the old ranks' files one at a time.
//
// What is resharded is the layout mixt's optimizers write (plugins/optimizers/common): each
// parameter's state under `state/<index>/<slot>`, `index` counting the optimizer's
// parameters() in its own order, an element-wise tensor of the parameter's (shard's) shape,
// or a step counter of no dimension. Everything else in the archive (format, learning
// rates, step counters) must be the same on every old rank, and is taken from rank 0's.
// An optimizer that keeps other per-parameter state (a norm a row) cannot be resharded:
// it is refused, naming the key, rather than guessed.
#pragma once

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "distributed/shard_manifest.h"

namespace mixt::distributed {

// A tensor an optimizer updates, as the optimizer orders them (its state/<index>/ keys).
struct OptimizedTensor {
  std::string name;
  std::vector<std::int64_t> sizes;  // the whole tensor's, unpadded
  at::ScalarType dtype = at::kFloat;
};

// The tensors `parameters` (an optimizer's, in its order) are, named by `named` (the same
// tensors, by name); empty when one is not among them (an optimizer that copies them).
std::optional<std::vector<OptimizedTensor>> in_optimizer_order(
    const std::vector<at::Tensor>& parameters, const std::vector<std::pair<std::string, at::Tensor>>& named);

// One line of a sharded checkpoint's manifest: "<name> [sizes] <dtype>".
std::string describe_tensor(const std::string& name, at::IntArrayRef sizes, at::ScalarType dtype);

// The first tensor where `saved` and `ours` differ, as "the checkpoint's '<line>', this run's
// '<line>'" (a missing one as "no <name>"); empty when they hold the same tensors.
std::string first_tensor_difference(const ShardManifest& saved, const std::vector<OptimizedTensor>& ours);

// Builds rank `rank` of `to_world`'s optimizer state (to_world 1: the whole state, each
// tensor of its own shape) from the archives `from_world` ranks wrote (from_world 1: a whole
// state), added in rank order. Throws std::runtime_error naming the key it cannot reshard.
class OptimizerStateResharder {
 public:
  OptimizerStateResharder(std::vector<OptimizedTensor> order, int from_world, int rank, int to_world);

  void add(int from_rank, torch::serialize::InputArchive& archive);
  // Once every old rank's archive was added.
  torch::serialize::InputArchive result();

 private:
  // The parameter `key` is element-wise state of, when it is: state/<index>/<slot> with a
  // tensor of that parameter's old chunk's shape.
  const OptimizedTensor* element_wise(const std::string& key, const at::Tensor& tensor) const;
  void copy_overlap(const OptimizedTensor& tensor, int from_rank, const at::Tensor& chunk, at::Tensor& into) const;

  std::vector<OptimizedTensor> order_;
  int from_world_, rank_, to_world_;
  int added_ = 0;
  std::map<std::string, at::Tensor> resharded_;  // element-wise state, this rank's new chunks
  std::map<std::string, at::Tensor> shared_;     // the rest, rank 0's
  std::map<std::string, c10::IValue> values_;    // non-tensor entries, rank 0's
};

// Rank `rank` of `world_size`'s shard file beside `checkpoint`, read into `into` (mixt::Error
// when it is not there: the hint says which files a resume needs).
void read_optimizer_shard(const std::filesystem::path& checkpoint, int rank, int world_size,
                          torch::serialize::InputArchive& into);
// Rank `rank` of `to_world`'s optimizer state (to_world 1: whole) from the shard files that
// `from_world` ranks wrote beside `checkpoint`; and from a whole state. mixt::Error (a recipe
// error, naming the checkpoint) when it cannot be resharded.
torch::serialize::InputArchive reshard_saved_state(const std::filesystem::path& checkpoint, int from_world,
                                                   std::vector<OptimizedTensor> order, int rank, int to_world);
torch::serialize::InputArchive reshard_whole_state(torch::serialize::InputArchive& whole,
                                                   std::vector<OptimizedTensor> order, int rank, int to_world);

}  // namespace mixt::distributed
