// mixt::Communicator over a c10d::Backend (ProcessGroupGloo or ProcessGroupNCCL). Every
// collective is waited for here, and a failure — a rank that died, the timeout — becomes a
// mixt::Error (runtime, exit 1) that names the operation and this rank.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "mixt/distributed.h"

namespace mixt::distributed {

class ProcessGroupCommunicator final : public Communicator {
 public:
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Backend> backend, std::string backend_name, int rank,
                           int world_size, std::chrono::milliseconds timeout, at::Device device = at::kCPU);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void all_reduce(at::Tensor& tensor, ReduceOp op) const override;
  void broadcast(at::Tensor& tensor, int root = 0) const override;
  void barrier() const override;

  const std::string& backend_name() const { return backend_name_; }

  // Blocking, for sharded training (distributed/shard_layout.h): `output` (n elements) gets
  // this rank's n of the sum over ranks of `input` (world_size x n, rank-major); `output`
  // (world_size x n) gets every rank's `input` (n), rank 0's first. `what` names the
  // operation in an error. Both tensors contiguous, of one dtype and device.
  void reduce_scatter_sum(at::Tensor& output, at::Tensor& input, const std::string& what) const;
  void all_gather(at::Tensor& output, at::Tensor& input, const std::string& what) const;
  // all_gather, started: finish with wait().
  c10::intrusive_ptr<c10d::Work> start_all_gather(at::Tensor& output, at::Tensor& input, const std::string& what) const;
  // reduce_scatter_sum, started: finish with wait().
  c10::intrusive_ptr<c10d::Work> start_reduce_scatter_sum(at::Tensor& output, at::Tensor& input,
                                                          const std::string& what) const;

  // Asynchronous sum of one contiguous tensor; finish with wait().
  c10::intrusive_ptr<c10d::Work> start_sum(at::Tensor& tensor) const;
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) const;

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& reason) const;

  c10::intrusive_ptr<c10d::Backend> backend_;
  std::string backend_name_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  at::Device device_;
};

}  // namespace mixt::distributed
