#include "plugins/option_table.h"

namespace mixt {

std::string option_table_rows(const std::vector<OptionDoc>& options) {
  std::string rows;
  for (const OptionDoc& option : options) {
    const std::string& value = option.default_value;
    const std::string shown = value.empty() ? "(required)" : value.front() == '(' ? value : "`" + value + "`";
    rows += "| `" + option.name + "` | " + shown + " | " + option.help + " |\n";
  }
  return rows;
}

}  // namespace mixt
