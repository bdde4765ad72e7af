// mixt/weight_shards.h — the model's weights as this rank keeps them, for a callback that
// keeps its own copy of them (an average): under trainer.distributed.sharding: parameters the
// copy can then live in the same 1/N as the weights, not whole on every rank. Since ABI 6.7.
//
// Under sharding: parameters each weight the optimizer updates is kept between steps as this
// rank's *chunk* of it: ceil(rows / world size) of its first dimension's rows, rank r the
// r-th such chunk, the last padded with zero rows (FSDP2's Shard(0)). A block's weights have
// no storage outside its forward and backward, so between steps they can only be read as
// chunks. Buffers, and weights the optimizer does not update, stay whole on every rank. In
// every other run, held() is the model's own state dict and gather() and cut() give back
// what they are given, so one code path serves both.
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "mixt/helpers/state_dict.h"

namespace mixt {

class WeightShards {
 public:
  virtual ~WeightShards();

  // Whether held() holds chunks (sharding: parameters over more than one rank).
  virtual bool sharded() const = 0;
  // The model's state dict (mixt::state_dict's names and order) as this rank holds it now,
  // each tensor in the model's dtype: a chunk for a weight the optimizer updates, else the
  // model's own tensor. A chunk is the optimizer's tensor itself, or, where that is a
  // master-weight policy's float32 master, a bfloat16/float16 copy made by this call: call
  // it after each step rather than keeping what it returned.
  virtual NamedTensors held() const = 0;
  // Whole tensors (new ones, in each tensor's dtype and device) from every rank's chunks of
  // them, shaped as held()'s; entries held whole are given back as they are. A collective:
  // every rank calls it at the same point, with the same names in the same order.
  virtual NamedTensors gather(const NamedTensors& chunks) const = 0;
  // This rank's chunks (new tensors) of `whole`, tensors of the model's shapes (a
  // checkpoint's); entries held whole are given back as they are. No communication.
  virtual NamedTensors cut(const NamedTensors& whole) const = 0;
};

// The weights of a run that keeps the whole model on every rank (sharded() false): what the
// host hands callbacks then, and what a callback built without a context's shards may use.
std::shared_ptr<const WeightShards> whole_weights(std::shared_ptr<const torch::nn::Module> model);

// An optional interface of a Callback whose checkpoint state is whole tensors gathered from
// chunks (WeightShards::gather). The host finds it with a dynamic_cast and, in a run whose
// weights are sharded, calls gather_for_checkpoint() on every rank before each checkpoint
// is written: the moment to gather, since Callback::save() then runs on rank 0 alone (after
// the epoch's evaluation and on_epoch_end it may run again, for the same checkpoint).
class GathersForCheckpoint {
 public:
  virtual ~GathersForCheckpoint();
  virtual void gather_for_checkpoint() = 0;
};

}  // namespace mixt
