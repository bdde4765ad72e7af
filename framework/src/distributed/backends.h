// The two c10d backends mixt uses, behind c10d::Backend so that nothing outside their one
// source file each sees a Gloo or NCCL type.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace mixt::distributed {

// Where this rank's Gloo device binds: a network interface (GLOO_SOCKET_IFNAME, as
// torch.distributed reads it), else an address (127.0.0.1 when every rank is on this
// node), else Gloo's default (this machine's hostname, falling back to loopback).
struct GlooDevice {
  std::string interface;
  std::string hostname;
};

// c10d::ProcessGroupGloo from libtorch_cpu (gloo_backend.cpp).
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    const GlooDevice& device);

// c10d::ProcessGroupNCCL from libtorch_cuda (nccl_backend.cpp), after making `device`
// this process's current CUDA device; a runtime error when mixt was built without it (a
// CPU-only LibTorch, or no nccl.h).
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    at::Device device);
bool nccl_available();

}  // namespace mixt::distributed
