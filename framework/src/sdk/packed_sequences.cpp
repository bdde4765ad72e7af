// The key functions of mixt::PackedModel and mixt::PackedTargets: their type information is
// emitted here, once, so a dynamic_cast in the host finds the interfaces in a plugin's objects.
#include "mixt/packed_sequences.h"

namespace mixt {

PackedModel::~PackedModel() = default;
PackedTargets::~PackedTargets() = default;

}  // namespace mixt
