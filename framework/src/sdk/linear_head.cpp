// The key functions of mixt::LinearHead and mixt::HeadLoss: their type information is emitted
// here, once, so a dynamic_cast in the host finds the interfaces in a plugin's objects.
#include "mixt/linear_head.h"

namespace mixt {

LinearHead::~LinearHead() = default;
HeadLoss::~HeadLoss() = default;

}  // namespace mixt
