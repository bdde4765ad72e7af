// A model traced once by LibTorch's tracer into a torch::jit::Module that mirrors its module
// tree: `mixt export` saves that module as TorchScript and translates its graph to ONNX.
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace mixt {

struct TracedModel {
  // forward(input) -> output; every parameter and buffer under the model's own names
  // (torchvision's for the zoo), the same tensors as the model's.
  torch::jit::Module module;
  // The forward's graph: `self` first, then the input; parameters reached through
  // prim::GetAttr chains from self. The nodes of routed submodules carry their scope.
  std::shared_ptr<torch::jit::Graph> graph;
};

// Traces `forward` on `example` (float32, CPU; the caller puts the model in eval mode) with
// gradients and autocast off. `model` supplies the module tree and the tensors.
TracedModel trace_model(const torch::nn::Module& model, const std::function<at::Tensor(const at::Tensor&)>& forward,
                        const at::Tensor& example);

// The traced forward at other batch sizes: the largest absolute difference from `forward`
// over inputs of `example`'s sample shape at each of `batches`. A usage error names the
// batch when the traced module fails or changes shape there (a forward that read the trace
// batch into a shape).
double check_other_batches(TracedModel& traced, const std::function<at::Tensor(const at::Tensor&)>& forward,
                           const at::Tensor& example, const std::vector<std::int64_t>& batches);

}  // namespace mixt
