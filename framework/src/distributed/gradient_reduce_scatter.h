// ZeRO-2's gradient reduction (trainer.distributed.sharding: gradients): the full
// gradients, summed over ranks and divided by the world size, become each rank's shard
// gradients, one reduce-scatter a bucket of distributed/shard_layout.h, and the full
// gradients are dropped.
//
// Where the tensors the optimizer updates are the model's own parameters (every policy but
// the master-weight ones), a post-accumulate-grad hook on each counts its bucket's gradients
// during the optimizer step's last backward and reduces a bucket as soon as it is complete,
// dropping its full gradients then: the full gradients of the whole model never exist at
// once, which is what ZeRO-2 saves. At most two buckets are in flight (the next is started
// before the last is waited for). Buckets are started in index order on every rank, so
// the ranks issue the same collectives in the same order; what backward left (a policy's
// masters, a parameter without a gradient) is reduced by finish().
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "distributed/process_group.h"
#include "distributed/shard_layout.h"

namespace mixt::distributed {

class GradientReduceScatter {
 public:
  GradientReduceScatter(ShardLayout& layout, const ProcessGroupCommunicator& communicator);
  ~GradientReduceScatter();
  GradientReduceScatter(const GradientReduceScatter&) = delete;
  GradientReduceScatter& operator=(const GradientReduceScatter&) = delete;

  // Whether buckets are reduced during backward (the hooks are installed).
  bool during_backward() const { return hooked_; }
  // Before each backward: `last` for the optimizer step's last micro-batch.
  void prepare_backward(bool last);
  // Reduces what backward has not, waits for every bucket. After the step's last backward.
  void finish();

  void on_gradient_ready(std::size_t bucket);  // called by the hooks
  // Called (under this object's lock) once a backward has produced a bucket's gradients
  // (in the step's last backward: once they are copied out and dropped); sharding:
  // parameters then releases the block's weights. Once a bucket each backward, or in finish().
  void set_on_bucket_taken(std::function<void(std::size_t bucket)> taken) { on_bucket_taken_ = std::move(taken); }

 private:
  struct InFlight {
    std::size_t bucket = 0;
    at::Tensor input, output;
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<bool> had_gradient;
  };
  void start_ready_locked();
  void start_locked(std::size_t bucket);
  // A tensor larger than a bucket, reduced a bucket's worth of rows at a time, so that no
  // padded copy of the whole of it is made beside its gradient.
  void reduce_in_pieces_locked(std::size_t bucket);
  void finish_locked(InFlight& flight);
  void reset_locked();

  ShardLayout& layout_;
  const ProcessGroupCommunicator& communicator_;
  bool hooked_ = false;

  std::mutex mutex_;  // hooks may run on autograd's device threads
  bool armed_ = false;
  std::vector<std::size_t> pending_;  // gradients still to come, per bucket
  std::size_t next_ = 0;              // the next bucket to start
  std::optional<InFlight> in_flight_;
  std::function<void(std::size_t)> on_bucket_taken_;
};

}  // namespace mixt::distributed
