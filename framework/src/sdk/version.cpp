#include "mixt/version.h"

#include <torch/version.h>

namespace mixt {
const char* version() { return MIXT_VERSION_STRING; }
const char* build_fingerprint() { return MIXT_BUILD_FINGERPRINT; }
}  // namespace mixt
