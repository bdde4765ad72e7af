// A callback with what names it in errors: the trainer calls every callback through
// guarded(), so a callback that throws stops the run as a runtime failure naming the
// callback and its plugin, and the loop's failure path saves the completed steps.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "mixt/callback.h"

namespace mixt {

struct NamedCallback {
  std::shared_ptr<Callback> callback;
  std::string name;    // registered name, or what a built-in is ("progress")
  std::string plugin;  // the plugin that registered it ("mixt" for built-ins)
  std::string file;    // that plugin's library (empty for built-ins)
  // Its state's name in checkpoints: `name`, or "name:label" ("name:2" without a label) for
  // an entry of a callback the recipe lists more than once. Empty: `name`.
  std::string state_key{};

  const std::string& key() const { return state_key.empty() ? name : state_key; }

  // Runs `call`, one of the callback's methods (`method` names it in the error).
  void guarded(const char* method, const std::function<void()>& call) const;
};

}  // namespace mixt
