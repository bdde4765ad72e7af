// mixt/distributed.h — what a plugin sees of a data-parallel run: its rank, the number of
// ranks, and a few blocking collectives over the process group the trainer created
// (c10d: NCCL on GPUs, Gloo on CPUs; see docs/distributed.md).
//
// A component receives a `const Communicator*` in its build context; it is null when the
// run is not distributed (a single process, no torchrun environment). Every collective
// must be called by every rank, in the same order, with tensors of the same shape and
// dtype: a rank that skips one makes the others wait until trainer.distributed.timeout,
// then fail with an error.
//
// The typical use is a loss scaler that must take the same skip decision on every rank:
//
//   at::Tensor found_inf = ...;                               // float 0/1, on the device
//   if (communicator) communicator->all_reduce(found_inf, mixt::ReduceOp::max);
//   if (found_inf.item<float>() == 0) optimizer.step();
#pragma once

#include <ATen/core/Tensor.h>

namespace mixt {

enum class ReduceOp { sum, max, avg };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;        // 0 .. world_size() - 1
  virtual int world_size() const = 0;  // number of ranks (processes)

  // In place, blocking: when they return, `tensor` holds the result on every rank.
  // Errors (a rank died, the timeout passed) are thrown as mixt::Error (runtime).
  virtual void all_reduce(at::Tensor& tensor, ReduceOp op) const = 0;
  virtual void broadcast(at::Tensor& tensor, int root = 0) const = 0;
  virtual void barrier() const = 0;
};

}  // namespace mixt
