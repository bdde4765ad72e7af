#include "experiment/generation_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "mixt/error.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_object(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw recipe_error("cannot read " + file.string(), SourceLocation{file.string()});
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw recipe_error(file.string() + " is not valid JSON: " + e.what(), SourceLocation{file.string()});
  }
  if (!json.is_object()) throw recipe_error(file.string() + " is not a JSON object", SourceLocation{file.string()});
  return json;
}

[[noreturn]] void bad_value(const fs::path& file, const std::string& key, const nlohmann::json& value,
                            const std::string& expected) {
  throw recipe_error(file.string() + ": " + key + " is " + value.dump() + "; expected " + expected,
                     SourceLocation{file.string()});
}

// eos_token_id: an id or a list of ids (Llama 3's instruct models list several).
std::vector<std::int64_t> eos_of(const fs::path& file, const nlohmann::json& value) {
  std::vector<std::int64_t> ids;
  const auto add = [&](const nlohmann::json& id) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0) bad_value(file, "eos_token_id", value, "token ids");
    ids.push_back(id.get<std::int64_t>());
  };
  if (value.is_array()) {
    for (const auto& id : value) add(id);
  } else {
    add(value);
  }
  return ids;
}

double number(const fs::path& file, const nlohmann::json& json, const std::string& key, double fallback, double low,
              bool low_open) {
  const auto found = json.find(key);
  if (found == json.end() || found->is_null()) return fallback;
  if (!found->is_number()) bad_value(file, key, *found, "a number");
  const double value = found->get<double>();
  if (value < low || (low_open && value == low)) {
    bad_value(file, key, *found, std::string(low_open ? "above " : "at least ") + std::to_string(low));
  }
  return value;
}

}  // namespace

GenerationDefaults read_generation_defaults(const fs::path& dir) {
  GenerationDefaults defaults;
  const fs::path generation = dir / "generation_config.json";
  const fs::path file = fs::exists(generation) ? generation : dir / "config.json";
  defaults.source = file.string();
  const nlohmann::json json = read_object(file);
  if (const auto eos = json.find("eos_token_id"); eos != json.end() && !eos->is_null()) {
    defaults.eos = eos_of(file, *eos);
  }
  if (file != generation) return defaults;
  if (const auto sample = json.find("do_sample"); sample != json.end() && !sample->is_null()) {
    if (!sample->is_boolean()) bad_value(file, "do_sample", *sample, "true or false");
    defaults.do_sample = sample->get<bool>();
  }
  defaults.temperature = number(file, json, "temperature", defaults.temperature, 0, true);
  defaults.top_k =
      static_cast<std::int64_t>(number(file, json, "top_k", static_cast<double>(defaults.top_k), 0, false));
  defaults.top_p = number(file, json, "top_p", defaults.top_p, 0, true);
  if (defaults.top_p > 1) bad_value(file, "top_p", json["top_p"], "at most 1");
  defaults.repetition_penalty = number(file, json, "repetition_penalty", defaults.repetition_penalty, 0, true);
  return defaults;
}

}  // namespace mixt
