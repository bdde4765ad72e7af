// What `mixt diagnose` installs on a model's float8 linear layers: each LinearFunction the
// precision policy put on a layer (mixt/helpers/linear.h) is wrapped so that, while it
// computes, mixt/helpers/float8.h reports every cast it makes with its scale, and the
// cast's underflow and saturation are counted under the layer's name. The recipe's numbers
// do not change: the wrapper calls the policy's function as it is.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <vector>

#include "diagnose/observations.h"
#include "mixt/helpers/linear.h"

namespace mixt::diagnose {

class Float8Watch {
 public:
  // Wraps the functions installed on `model` (after the policy's setup) until destroyed.
  Float8Watch(torch::nn::Module& model, Observations& into);
  ~Float8Watch();
  Float8Watch(const Float8Watch&) = delete;
  Float8Watch& operator=(const Float8Watch&) = delete;

 private:
  struct Wrapped {
    LinearLayer layer;
    std::shared_ptr<LinearFunction> original;
  };
  std::vector<Wrapped> wrapped_;
};

}  // namespace mixt::diagnose
