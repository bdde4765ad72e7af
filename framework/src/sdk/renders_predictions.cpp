// The key function of mixt::RendersPredictions: its type information is emitted here, once,
// so a dynamic_cast in the host finds the interface in a plugin's task.
#include "mixt/renders_predictions.h"

namespace mixt {

RendersPredictions::~RendersPredictions() = default;

}  // namespace mixt
