// A model traced once by LibTorch's tracer into a torch::jit::Module that mirrors its module
// tree: `mixt export` saves that module as TorchScript and translates its graph to ONNX.
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
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
// gradients and autocast off. `model` supplies the module tree and the tensors, less the
// parameters named in `left_out` (an adapter's, once merged: the forward no longer reads them).
TracedModel trace_model(const torch::nn::Module& model, const std::function<at::Tensor(const at::Tensor&)>& forward,
                        const at::Tensor& example, const std::set<std::string>& left_out = {});

// Inputs of a shape ([batch, *sample]) the model takes: seeded normal floats for an image
// model, token ids below the vocabulary for a language model.
using InputMaker = std::function<at::Tensor(const std::vector<std::int64_t>& shape)>;

// Which dimension of the input a check varies, and its name in messages: the batch (0), or
// an axis the task leaves open (mixt/task.h's OpenAxis: a token model's sequence, dimension 1).
struct VariedAxis {
  std::size_t dim = 0;
  std::string words = "batch";
};

// The traced forward where the input's `axis` takes each of `sizes` instead of the trace's
// (`example`'s): the largest absolute difference from `forward` on inputs made by
// `make_input`. A usage error names the size when the traced module fails or changes shape
// there (a forward that read a size of the trace's input into a shape).
double check_other_sizes(TracedModel& traced, const std::function<at::Tensor(const at::Tensor&)>& forward,
                         const at::Tensor& example, const InputMaker& make_input, VariedAxis axis,
                         const std::vector<std::int64_t>& sizes);

}  // namespace mixt
