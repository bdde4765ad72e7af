#include "window_keys.h"

#include <optional>
#include <string>

namespace tokens {

mixt::OptionsOf<WindowKeys> window_keys(std::int64_t context_default) {
  WindowKeys defaults;
  defaults.context = context_default;
  return mixt::OptionsOf<WindowKeys>(defaults)
      .add(&WindowKeys::context, "context", "tokens per sample (T): a window holds context + 1", mixt::at_least(1))
      .add(&WindowKeys::from, "from", "start of the span used, a fraction of the tokens (val: the train's to)",
           mixt::between(0, 1))
      .add(&WindowKeys::to, "to", "end of the span used, a fraction of the tokens (train: 0.9 keeps 10% for val)",
           mixt::between(0, 1))
      .rule("to", [](const WindowKeys& k) -> std::optional<std::string> {
        if (k.from < k.to) return std::nullopt;
        return "must be above from (" + mixt::format_yaml(k.from) + ")";
      });
}

}  // namespace tokens
