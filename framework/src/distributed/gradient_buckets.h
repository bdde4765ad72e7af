// Gradient averaging by bucketed all-reduce, as DDP's reducer does it without hooks:
// parameters are grouped, in reverse registration order (roughly the order backward
// produces their gradients), into buckets of at most `bucket_bytes` of one dtype and
// device. Per bucket: flatten the gradients into one buffer, all-reduce (sum), divide by
// the world size, copy back. Every bucket's all-reduce is started before the first is
// waited for, so the transfers of one overlap the reductions of the next.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "distributed/process_group.h"

namespace mixt::distributed {

class GradientBuckets {
 public:
  GradientBuckets(const std::vector<at::Tensor>& parameters, std::int64_t bucket_bytes);

  // Averages the gradients of every parameter across ranks. A parameter without a gradient
  // on this rank contributes zeros (and gets none back).
  void average(const ProcessGroupCommunicator& communicator) const;

  std::size_t bucket_count() const { return buckets_.size(); }

 private:
  std::vector<std::vector<at::Tensor>> buckets_;
};

}  // namespace mixt::distributed
