// The defaults of mixt::Optimizer that need the error machinery.
#include "mixt/optimizer.h"

#include "mixt/error.h"

namespace mixt {

void Optimizer::step_scaled(const at::Tensor& /*grad_scale*/, const at::Tensor& /*found_inf*/) {
  throw runtime_error("this optimizer cannot take a loss scale and found-inf flag (can_step_scaled() is false)",
                      "call step_scaled() only when can_step_scaled() is true; mixt::GradScaler does so");
}

}  // namespace mixt
