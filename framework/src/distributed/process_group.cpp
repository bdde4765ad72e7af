#include "distributed/process_group.h"

#include "mixt/error.h"

namespace mixt::distributed {

namespace {
c10d::ReduceOp to_c10d(ReduceOp op) {
  // Gloo has no AVG: an average is a sum divided here, the same on every backend.
  return op == ReduceOp::max ? c10d::ReduceOp(c10d::ReduceOp::MAX) : c10d::ReduceOp(c10d::ReduceOp::SUM);
}
const char* name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "?";
}
}  // namespace

ProcessGroupCommunicator::ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Backend> backend,
                                                   std::string backend_name, int rank, int world_size,
                                                   std::chrono::milliseconds timeout, at::Device device)
    : backend_(std::move(backend)),
      backend_name_(std::move(backend_name)),
      rank_(rank),
      world_size_(world_size),
      timeout_(timeout),
      device_(device) {}

void ProcessGroupCommunicator::fail(const std::string& what, const std::string& reason) const {
  throw runtime_error("distributed " + what + " failed on rank " + std::to_string(rank_) + " of " +
                          std::to_string(world_size_) + " (" + backend_name_ + "): " + reason,
                      "another rank stopped (crashed, was killed, or failed with its own error: see its "
                      "output), or did not reach this point within trainer.distributed.timeout (" +
                          std::to_string(timeout_.count() / 1000) + "s)");
}

void ProcessGroupCommunicator::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) const {
  try {
    if (!work->wait(timeout_)) fail(what, "timed out");
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& error) {
    fail(what, error.what_without_backtrace());
  } catch (const std::exception& error) {
    fail(what, error.what());
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCommunicator::start_sum(at::Tensor& tensor) const {
  std::vector<at::Tensor> tensors{tensor};
  try {
    return backend_->allreduce(tensors, c10d::AllreduceOptions{});
  } catch (const c10::Error& error) {
    fail("all_reduce(sum)", error.what_without_backtrace());
  }
}

void ProcessGroupCommunicator::all_reduce(at::Tensor& tensor, ReduceOp op) const {
  if (op == ReduceOp::avg && !at::isFloatingType(tensor.scalar_type())) {
    throw runtime_error("all_reduce(avg) needs a floating-point tensor, got " +
                        std::string(c10::toString(tensor.scalar_type())));
  }
  at::Tensor buffer = tensor.is_contiguous() ? tensor : tensor.contiguous();
  std::vector<at::Tensor> tensors{buffer};
  const std::string what = std::string("all_reduce(") + name(op) + ")";
  c10d::AllreduceOptions options;
  options.reduceOp = to_c10d(op);
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = backend_->allreduce(tensors, options);
  } catch (const c10::Error& error) {
    fail(what, error.what_without_backtrace());
  }
  wait(work, what);
  if (op == ReduceOp::avg) buffer.div_(world_size_);
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCommunicator::start_reduce_scatter_sum(at::Tensor& output, at::Tensor& input,
                                                                                  const std::string& what) const {
  try {
    c10d::ReduceScatterOptions options;
    options.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
    return backend_->_reduce_scatter_base(output, input, options);
  } catch (const c10::Error& error) {
    fail(what, error.what_without_backtrace());
  }
}

void ProcessGroupCommunicator::reduce_scatter_sum(at::Tensor& output, at::Tensor& input,
                                                  const std::string& what) const {
  wait(start_reduce_scatter_sum(output, input, what), what);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCommunicator::start_all_gather(at::Tensor& output, at::Tensor& input,
                                                                          const std::string& what) const {
  try {
    return backend_->_allgather_base(output, input, c10d::AllgatherOptions{});
  } catch (const c10::Error& error) {
    fail(what, error.what_without_backtrace());
  }
}

void ProcessGroupCommunicator::all_gather(at::Tensor& output, at::Tensor& input, const std::string& what) const {
  wait(start_all_gather(output, input, what), what);
}

void ProcessGroupCommunicator::broadcast(at::Tensor& tensor, int root) const {
  at::Tensor buffer = tensor.is_contiguous() ? tensor : tensor.contiguous();
  std::vector<at::Tensor> tensors{buffer};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = backend_->broadcast(tensors, options);
  } catch (const c10::Error& error) {
    fail("broadcast", error.what_without_backtrace());
  }
  wait(work, "broadcast");
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
}

void ProcessGroupCommunicator::barrier() const {
  c10::intrusive_ptr<c10d::Work> work;
  try {
    c10d::BarrierOptions options;
    if (device_.is_cuda()) {  // NCCL's barrier is an all-reduce on this GPU
      options.device_ids = {device_.index()};
      options.device = device_;
    }
    work = backend_->barrier(options);
  } catch (const c10::Error& error) {
    fail("barrier", error.what_without_backtrace());
  }
  wait(work, "barrier");
}

}  // namespace mixt::distributed
