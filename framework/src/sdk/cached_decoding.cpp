// The key function of mixt::CachedDecoding: its type information is emitted here, once, so a
// dynamic_cast in the host finds the interface in a plugin's model.
#include "mixt/cached_decoding.h"

namespace mixt {

CachedDecoding::~CachedDecoding() = default;

}  // namespace mixt
