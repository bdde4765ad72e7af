#include "train/stop_control.h"

namespace mixt {

void StopControl::request_stop(const std::string& reason, StopWhen when) {
  if (!request_) {
    request_ = StopRequest{caller_, reason, when};
  } else if (when == StopWhen::after_step && request_->when != StopWhen::after_step) {
    request_->when = StopWhen::after_step;  // sooner, for the reason first given
  }
}

const char* stop_when_name(StopWhen when) { return when == StopWhen::after_step ? "after_step" : "after_evaluation"; }

}  // namespace mixt
