// Shared by the float16 policies (amp_fp16, custom_scaler): a one-time note when they run on
// a CPU. They work there, but LibTorch 2.11 has no fast CPU kernel for the float16
// convolution weight gradient: a training step of recipes/fashion_mnist.yaml's CNN took
// 3.3 s in float16 autocast against 0.05 s in fp32 on a 2-core AVX-512 machine, in PyTorch
// as in mixt. Users who pick float16 on a CPU deserve to know before the first epoch.
#pragma once

#include <ATen/core/TensorBody.h>

#include <cstdio>

namespace mixt::precision {

inline void note_float16_on_cpu(const char* policy, at::Device device) {
  static bool said = false;  // once per process, however many runs a test makes
  if (device.is_cpu() && !said) {
    std::fprintf(stderr,
                 "mixt: warning: precision %s: float16 on the CPU is slow (no fast float16 convolution backward "
                 "in LibTorch's CPU kernels: tens of times slower than fp32); amp_bf16 is the mixed-precision "
                 "policy for CPUs\n",
                 policy);
    said = true;
  }
}

}  // namespace mixt::precision
