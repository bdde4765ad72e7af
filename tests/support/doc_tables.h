// The option tables of the docs, as rows to compare with option_table_rows(declarations).
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "test_support.h"

namespace mixt::testing {

// The rows ("| `key` | ...") of the first table after `heading` in docs/`document`, but the
// row of `except`, each with its newline.
inline std::string doc_table_rows(const std::string& document, const std::string& heading,
                                  const std::string& except = "") {
  const std::string doc = read_file(source_dir() / "docs" / document);
  const auto start = doc.find(heading);
  EXPECT_NE(start, std::string::npos) << document << ": no " << heading;
  if (start == std::string::npos) return {};
  std::istringstream lines(doc.substr(start));
  std::string rows;
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    const bool row = line.rfind("| `", 0) == 0;
    if (in_table && line.rfind("|", 0) != 0) break;  // the table ended
    in_table = in_table || row;
    if (row && (except.empty() || line.rfind("| `" + except + "` |", 0) != 0)) rows += line + "\n";
  }
  return rows;
}

}  // namespace mixt::testing
