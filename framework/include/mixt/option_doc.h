// mixt/option_doc.h — one documented option, as `mixt describe KIND NAME` shows it: its own
// header so that a helper can document its options without the whole plugin contract.
#pragma once

#include <string>

namespace mixt {

// Usually made from a mixt/options.h declaration, which reads the option with this default.
struct OptionDoc {
  std::string name;
  std::string default_value;  // as it would be written in YAML; empty = required
  std::string help;
};

}  // namespace mixt
