// mixt/version.h — versions of mixt and of the plugin ABI.
#pragma once

#define MIXT_VERSION_STRING "0.1.0"

// The plugin ABI. Bump the major on any change to an SDK class layout or virtual table;
// bump the minor when something is only added (old plugins keep working).
#define MIXT_ABI_MAJOR 6
// What each version added: CHANGELOG.md.
#define MIXT_ABI_MINOR 10

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
