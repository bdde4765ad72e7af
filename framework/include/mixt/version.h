// mixt/version.h — versions of mixt and of the plugin ABI.
#pragma once

#define MIXT_VERSION_STRING "0.1.0"

// The plugin ABI. Bump the major on any change to an SDK class layout or virtual table;
// bump the minor when something is only added (old plugins keep working).
#define MIXT_ABI_MAJOR 1
// 1.1: PrecisionContext::communicator (mixt/distributed.h).
// 1.2: mixt::BatchNorm1d/2d/3d and sync_batch_norm (mixt/batch_norm.h).
// 1.3: DataLoader::start_epoch(epoch, first_batch) and DataLoader::position()
//      (mixt/data_loader.h); mixt::BatchNorm*d clone as themselves (mixt/batch_norm.h).
// 1.4: mixt::NamedClasses and class_names_of (mixt/dataset.h).
#define MIXT_ABI_MINOR 4

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
