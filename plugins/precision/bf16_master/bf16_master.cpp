// precision/bf16_master — a bfloat16 model with float32 master weights, no loss scaling.
//
// The model's floating-point parameters and buffers are cast to bfloat16 (except the
// submodules of precision.fp32_modules), so its weights, activations and gradients take half
// the memory; the optimizer updates float32 masters (its state is float32 too), and after
// each step the masters are rounded into the model. Updates far below a weight's bfloat16
// resolution therefore accumulate instead of vanishing. The forward pass runs under
// autocast(bfloat16), so float32 modules and reduced-precision ones meet without casts.
// bfloat16 has float32's exponent range: no loss scaler, no skipped step.
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <memory>

#include "../common/bf16_master_policy.h"

namespace {

std::unique_ptr<mixt::PrecisionPolicy> make_bf16_master(const mixt::NoOptions&, const mixt::PrecisionContext& context) {
  return std::make_unique<mixt::precision::Bf16MasterPolicy>(context.fp32_modules);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("bf16_master",
                          "bfloat16 model, float32 master weights in the optimizer, autocast(bfloat16), no scaler",
                          mixt::kNoOptions, make_bf16_master);
}

}  // namespace

MIXT_PLUGIN("bf16_master", "1.0.0", register_components)
