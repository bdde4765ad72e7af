// The JSON document a command prints on stdout (`mixt evaluate --json`), from its captured
// output, which may begin with lines on stderr.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace mixt::testing {

inline nlohmann::json json_document(const std::string& output) {
  const auto start = output.find("{\n");
  if (start == std::string::npos) throw std::runtime_error("no JSON in: " + output);
  return nlohmann::json::parse(output.substr(start, output.rfind('}') - start + 1));
}

}  // namespace mixt::testing
