// Options as the rows of a Markdown table, "| `key` | `default` | help |": how the docs'
// option tables are written from the declarations (and checked against them by a test).
#pragma once

#include <string>
#include <vector>

#include "mixt/option_doc.h"

namespace mixt {

// One row per option, each ending in a newline. A required option's default reads
// "(required)"; a default said in words ("(the dataset's)") is written as it is.
std::string option_table_rows(const std::vector<OptionDoc>& options);

}  // namespace mixt
