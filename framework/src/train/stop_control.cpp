#include "train/stop_control.h"

#include <nlohmann/json.hpp>

namespace mixt {

void StopControl::request_stop(const std::string& reason, StopWhen when) {
  if (!request_) {
    request_ = StopRequest{caller_, reason, when};
  } else if (when == StopWhen::after_step && request_->when != StopWhen::after_step) {
    request_->when = StopWhen::after_step;  // sooner, for the reason first given
  }
}

const char* stop_when_name(StopWhen when) { return when == StopWhen::after_step ? "after_step" : "after_evaluation"; }

std::string to_json_text(const StopRequest& request) {
  return nlohmann::json{{"by", request.by}, {"reason", request.reason}, {"when", stop_when_name(request.when)}}.dump();
}

StopRequest stop_request_from_json_text(const std::string& text) {
  const nlohmann::json json = nlohmann::json::parse(text);
  const bool after_step = json.at("when").get<std::string>() == stop_when_name(StopWhen::after_step);
  return {json.at("by").get<std::string>(), json.at("reason").get<std::string>(),
          after_step ? StopWhen::after_step : StopWhen::after_evaluation};
}

}  // namespace mixt
