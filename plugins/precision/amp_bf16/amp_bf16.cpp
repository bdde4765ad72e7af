// precision/amp_bf16 — the forward pass and loss under autocast(bfloat16), no loss scaling:
// bfloat16 keeps float32's 8-bit exponent, so gradients neither underflow nor overflow where
// float32 would not, and a scaler would only add work. It therefore never skips a step.
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include "../common/scaler_options.h"

namespace {

class AmpBf16Policy : public mixt::PrecisionPolicy {
 public:
  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kBFloat16);
  }
};

// No options; the loss scaler's keys are rejected where written (without becoming known
// keys that an unknown key's hint would offer), so no describe entry shows them.
const auto kOptions = mixt::OptionsOf<mixt::NoOptions>().refuse(
    mixt::precision::loss_scaler_keys(),
    "amp_bf16 does not scale the loss: bfloat16 has float32's exponent range, so gradients do not "
    "underflow and there is nothing for a loss scaler to do",
    "remove the option, or use `precision: {name: amp_fp16}` for float16 with loss scaling");

std::unique_ptr<mixt::PrecisionPolicy> make_amp_bf16(const mixt::NoOptions&, const mixt::PrecisionContext&) {
  return std::make_unique<AmpBf16Policy>();
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("amp_bf16", "autocast to bfloat16, no loss scaling (never skips a step)", kOptions,
                          make_amp_bf16);
}

}  // namespace

MIXT_PLUGIN("amp_bf16", "1.0.0", register_components)
