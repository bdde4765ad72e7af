// The key function of mixt::ShardableMasters: its type information is emitted here, once,
// so a dynamic_cast in the host finds the interface in a plugin's precision policy.
#include "mixt/helpers/master_weights.h"

namespace mixt {

ShardableMasters::~ShardableMasters() = default;

}  // namespace mixt
