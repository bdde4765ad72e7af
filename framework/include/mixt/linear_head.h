// mixt/linear_head.h — optional interfaces that let a task compute a model's last linear map
// together with its loss, so that the map's whole output never exists: a language model's
// [tokens, vocab] logits, 196 MiB per 1,024 tokens at GPT-2's vocabulary in float32, and as
// much again for their softmax and their gradient.
//
// A model whose output is `features @ weight^T + bias` derives from LinearHead besides
// mixt::Model; a task that can compute its training loss from the features and that map
// derives from HeadLoss besides mixt::Task. When both do, the training step calls
// features() and head_loss() instead of forward() and loss(); evaluation, generation and
// export still call forward(). The host finds both with a dynamic_cast. Since ABI 6.2.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace mixt {

// The model's last linear map as the host sees it.
struct HeadMap {
  std::string name;   // the submodule forward() routes it as ("lm_head"): precision.fp32_modules applies
  at::Tensor weight;  // [outputs, width], the parameter itself (a tied head: the embedding's)
  at::Tensor bias;    // [outputs], or undefined
};

class LinearHead {
 public:
  virtual ~LinearHead();
  // forward(inputs) without the last map: [*, width], routed as forward() routes it, so that
  // forward(inputs) == linear(features(inputs), head().weight, head().bias).
  virtual at::Tensor features(const at::Tensor& inputs) = 0;
  virtual HeadMap head() const = 0;
};

class HeadLoss {
 public:
  virtual ~HeadLoss();
  // Whether head_loss() is to be used now (a task may leave it to an option).
  virtual bool fuses_head() const = 0;
  // loss(linear(features, head.weight, head.bias), targets), computed without holding the
  // map's whole output. Runs under the policy's autocast, or in float32 with autocast off
  // when precision.fp32_modules names the head.
  virtual at::Tensor head_loss(const at::Tensor& features, const HeadMap& head, const at::Tensor& targets) const = 0;
};

}  // namespace mixt
