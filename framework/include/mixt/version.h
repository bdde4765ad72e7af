// mixt/version.h — versions of mixt and of the plugin ABI.
#pragma once

#define MIXT_VERSION_STRING "0.1.0"

// The plugin ABI. Bump the major on any change to an SDK class layout or virtual table;
// bump the minor when something is only added (old plugins keep working).
#define MIXT_ABI_MAJOR 4
// 2.0: the callback kind (mixt/callback.h, Registrar::add_callback); LoaderDataset
//      derives from the capability interfaces ResumesMidEpoch and CountsBadSamples
//      (mixt/dataset.h), which changes its layout.
// 3.0: Evaluation has weights, top5 and top_k; Callback::evaluated_weights() and the
//      weights argument of on_evaluation_start; ComponentInfo::enabled_by_default;
//      PrecisionContext::fp32_modules; PrecisionPolicy::optimizer_parameters,
//      prepare_input and gradients_ready (master weights); mixt::warn (mixt/error.h).
// 4.0: the sync-free loss-scaled step: Optimizer::can_step_scaled and step_scaled;
//      PrecisionPolicy::step and GradScaler::step return mixt::StepOutcome
//      (mixt/step_outcome.h; a bool converts), and so is StepEnd::applied;
//      GradScalerOptions::step_on_device. mixt::SubmoduleObserver
//      (mixt/helpers/fp32_modules.h: call_submodule reports each routed output, for
//      mixt diagnose) and mixt::MasterWeights (mixt/helpers/master_weights.h).
#define MIXT_ABI_MINOR 0

#define MIXT_STRINGIFY_IMPL(x) #x
#define MIXT_STRINGIFY(x) MIXT_STRINGIFY_IMPL(x)

#ifndef MIXT_TORCH_CUDA
#define MIXT_TORCH_CUDA unknown
#endif

// What a plugin was compiled against. Host and plugin must agree exactly: a different
// LibTorch, C++ ABI or CUDA flavour means different class layouts behind the same names.
#define MIXT_BUILD_FINGERPRINT                                                     \
  "torch " TORCH_VERSION "; cxx11abi " MIXT_STRINGIFY(_GLIBCXX_USE_CXX11_ABI) "; " \
  "cuda " MIXT_STRINGIFY(MIXT_TORCH_CUDA) "; gcc " MIXT_STRINGIFY(__GNUC__)

namespace mixt {
// The mixt library's own version and fingerprint, as compiled into libmixt.
const char* version();
const char* build_fingerprint();
}  // namespace mixt
