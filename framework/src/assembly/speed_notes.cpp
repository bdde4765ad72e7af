#include "assembly/speed_notes.h"

#include <ATen/autocast_mode.h>

#include <mutex>
#include <set>

#include "common/cpu_features.h"
#include "common/warnings.h"

namespace mixt {

namespace {
// The type the policy computes in: its autocast's, else the one it cast the model to.
at::ScalarType reduced_dtype(const PrecisionPolicy& precision, const Model& model, at::Device device) {
  {
    AutocastScope scope = precision.autocast(device.type());
    if (at::autocast::is_autocast_enabled(device.type())) {
      const at::ScalarType dtype = at::autocast::get_autocast_dtype(device.type());
      if (dtype != at::kFloat) return dtype;
    }
  }
  for (const at::Tensor& parameter : model.parameters()) {
    if (parameter.is_floating_point() && parameter.scalar_type() != at::kFloat) return parameter.scalar_type();
  }
  return at::kFloat;
}
}  // namespace

std::string speed_note(const std::string& policy, const PrecisionPolicy& precision, const Model& model,
                       at::Device device) {
  if (!device.is_cpu()) return "";
  const at::ScalarType dtype = reduced_dtype(precision, model, device);
  const bool native_bf16 = cpu_has_native_bfloat16();
  const std::string no_bf16 = "this CPU has no native bfloat16 (" + native_bfloat16_features() + ")";
  // Measured with LibTorch 2.11, in PyTorch as in mixt, on recipes/fashion_mnist.yaml's CNN: a
  // float16 step took 3.3 s against fp32's 0.05 s (2-core AVX-512), amp_bf16 trained 6.8x
  // slower than fp32 on an AVX2 CPU without bfloat16 instructions.
  if (dtype == at::kHalf) {
    return "precision " + policy +
           ": float16 on the CPU is slow (no fast float16 convolution backward in LibTorch's CPU kernels: tens of "
           "times slower than fp32); " +
           (native_bf16 ? std::string("amp_bf16 is the mixed-precision policy for CPUs")
                        : no_bf16 + " either, so amp_bf16 is slow too: fp32 is the fastest policy on this machine");
  }
  if (dtype == at::kBFloat16 && !native_bf16) {
    return "precision " + policy + ": " + no_bf16 +
           ": bfloat16 runs several times slower than float32 here; fp32 is faster on this machine";
  }
  return "";
}

void warn_once(const std::string& note) {
  static std::mutex mutex;
  static std::set<std::string> said;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!said.insert(note).second) return;
  }
  warn(note);
}

}  // namespace mixt
