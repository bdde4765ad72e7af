// The one mixt file that includes NCCL's header (through ProcessGroupNCCL.hpp).
//
// Built only when LibTorch has CUDA (libtorch_cuda) and the nvidia-nccl-cu13 wheel's
// nccl.h was found; nccl_unavailable.cpp stands in otherwise. ProcessGroupNCCL::Options
// embeds an ncclConfig_t by value, so the nccl.h seen here must be the NCCL torch was
// built with, or the struct layouts differ (heap corruption at runtime): CMake passes the
// version torch's wheel metadata pins (MIXT_TORCH_NCCL_VERSION_CODE) and this file refuses
// to compile against another header.
#include <c10/cuda/CUDAFunctions.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "distributed/backends.h"

#ifndef MIXT_TORCH_NCCL_VERSION_CODE
#error "MIXT_TORCH_NCCL_VERSION_CODE (the NCCL version torch pins) must be defined by CMake"
#endif
static_assert(NCCL_VERSION_CODE == MIXT_TORCH_NCCL_VERSION_CODE,
              "nccl.h is not the NCCL version torch was built with (see framework/CMakeLists.txt)");

namespace mixt::distributed {

bool nccl_available() { return true; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    at::Device device) {
  // As torch.cuda.set_device(local_rank): NCCL's communicators and streams go to this GPU.
  c10::cuda::set_device(device.index());
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}

}  // namespace mixt::distributed
