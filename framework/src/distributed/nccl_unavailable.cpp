// Stands in for nccl_backend.cpp when mixt is built without NCCL (a CPU-only LibTorch, or
// the nvidia-nccl-cu13 wheel's nccl.h not found).
#include "distributed/backends.h"
#include "mixt/error.h"

namespace mixt::distributed {

bool nccl_available() { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                    std::chrono::milliseconds, at::Device) {
  throw runtime_error("this mixt was built without NCCL (no libtorch_cuda or no nccl.h at configure time)",
                      "use trainer.distributed.backend: gloo, or rebuild against the CUDA wheel");
}

}  // namespace mixt::distributed
