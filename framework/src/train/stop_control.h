// The trainer's side of mixt::TrainControl: the callbacks' stop requests, each with the
// name of the callback that asked (the trainer names the callback it is calling).
#pragma once

#include <optional>
#include <string>

#include "mixt/train_control.h"

namespace mixt {

struct StopRequest {
  std::string by;      // the callback's name
  std::string reason;  // its words
  StopWhen when = StopWhen::after_evaluation;
};

class StopControl final : public TrainControl {
 public:
  void request_stop(const std::string& reason, StopWhen when) override;
  bool stop_requested() const override { return request_.has_value(); }

  // The callback called from now on (what a request is attributed to).
  void calling(const std::string& name) { caller_ = name; }
  const std::optional<StopRequest>& request() const { return request_; }
  // The request every rank reports (the ranks' agreement), in place of this process's own.
  void agreed(StopRequest request) { request_ = std::move(request); }
  bool after_step() const { return request_ && request_->when == StopWhen::after_step; }

 private:
  std::string caller_ = "a callback";
  std::optional<StopRequest> request_;
};

// "after_step" / "after_evaluation", as metrics.jsonl writes it.
const char* stop_when_name(StopWhen when);

// A request as JSON text and back: how one rank's request reaches the others
// (Coordinator::text_from carries text).
std::string to_json_text(const StopRequest& request);
StopRequest stop_request_from_json_text(const std::string& text);

}  // namespace mixt
