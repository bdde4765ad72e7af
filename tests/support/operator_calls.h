// The ATen operators a piece of code calls on this thread, as the dispatcher (and the
// profiler) names them: "aten::_foreach_add_", "aten::_local_scalar_dense" (what .item()
// reads through, a device synchronisation on a GPU). Nested calls are included.
#pragma once

#include <ATen/record_function.h>

#include <functional>
#include <string>
#include <vector>

namespace mixt::testing {

inline std::vector<std::string> operators_called_during(const std::function<void()>& run) {
  static thread_local std::vector<std::string>* calls = nullptr;
  std::vector<std::string> names;
  calls = &names;
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (calls != nullptr) calls->emplace_back(fn.name());
        return nullptr;
      }));
  run();
  at::removeCallback(handle);
  calls = nullptr;
  return names;
}

}  // namespace mixt::testing
