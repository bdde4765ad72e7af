// The key functions of mixt::PackedModel, mixt::PackedTargets and mixt::PacksRows: their type information is
// emitted here, once, so a dynamic_cast in the host finds the interfaces in a plugin's objects.
#include "mixt/packed_sequences.h"

namespace mixt {

PackedModel::~PackedModel() = default;
PackedTargets::~PackedTargets() = default;
PacksRows::~PacksRows() = default;

}  // namespace mixt
