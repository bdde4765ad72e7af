// Gradient averaging by bucketed all-reduce, as DDP's reducer does it: parameters are
// grouped, in reverse registration order (roughly the order backward produces their
// gradients), into buckets of at most `bucket_bytes` of one dtype and device. Per bucket:
// flatten the gradients into one buffer, all-reduce (sum), divide by the world size, copy
// back.
//
// Without overlap, every bucket's all-reduce is started after backward (all before the
// first is waited for). With overlap, a post-accumulate-grad hook on every parameter
// counts the gradients of its bucket during the armed backward (the last micro-batch's)
// and starts the bucket's all-reduce as soon as the bucket is complete — while backward
// goes on computing earlier layers. Buckets are always started in index order, so every
// rank issues the same collectives in the same order; a bucket whose parameters got no
// gradient is started by average().
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "distributed/process_group.h"

namespace mixt::distributed {

class GradientBuckets {
 public:
  GradientBuckets(const std::vector<at::Tensor>& parameters, std::int64_t bucket_bytes);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Installs the hooks that start all-reduces during backward (see above).
  void enable_overlap(const ProcessGroupCommunicator& communicator);
  // Before each backward: `last` when it is the optimizer step's last micro-batch.
  void prepare_backward(bool last);
  // Averages the gradients of every parameter across ranks. A parameter without a gradient
  // on this rank contributes zeros (and gets none back).
  void average(const ProcessGroupCommunicator& communicator);

  std::size_t bucket_count() const { return buckets_.size(); }
  // Buckets started by the hooks during the last armed backward (for tests).
  std::size_t started_during_backward() const { return started_during_backward_; }

  void on_gradient_ready(std::size_t bucket);  // called by the hooks

 private:
  void start_ready_locked();
  void start_locked(std::size_t bucket, const ProcessGroupCommunicator& communicator);
  void reset_locked();

  std::vector<std::vector<at::Tensor>> buckets_;
  const ProcessGroupCommunicator* overlap_ = nullptr;

  std::mutex mutex_;  // hooks may run on autograd's device threads
  bool armed_ = false;
  std::vector<std::size_t> pending_;  // gradients still to come, per bucket
  std::size_t next_ = 0;              // the next bucket to start
  std::vector<at::Tensor> flats_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::size_t started_during_backward_ = 0;
};

}  // namespace mixt::distributed
