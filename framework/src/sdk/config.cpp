#include "mixt/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "common/closest_match.h"
#include "recipe/recipe_node.h"

namespace mixt {

namespace {

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Thrown by parse_number for a literal that is not zero but reads as 0 or a subnormal
// (1e-400, 1e-310): caught where the key is known, to say so at its place.
struct TooCloseToZero {};
constexpr const char* kTooCloseToZero = "is too close to zero for a double (it would become 0 or a subnormal)";

std::optional<double> parse_number(const RecipeNode& node) {
  if (node.type != RecipeNode::Type::scalar || node.quoted || node.scalar.empty()) return {};
  const std::string text = lowercase(node.scalar);
  if (text == ".inf" || text == "+.inf" || text == "inf") return INFINITY;
  if (text == "-.inf" || text == "-inf") return -INFINITY;
  if (text == ".nan" || text == "nan") return NAN;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(node.scalar.c_str(), &end);
  if (end != node.scalar.c_str() + node.scalar.size()) return {};
  if ((errno == ERANGE && std::fabs(value) < 1) || std::fpclassify(value) == FP_SUBNORMAL) throw TooCloseToZero{};
  return value;
}

std::optional<std::int64_t> parse_integer(const RecipeNode& node) {
  if (node.type != RecipeNode::Type::scalar || node.quoted) return {};
  std::int64_t value = 0;
  const char* first = node.scalar.data();
  const char* last = first + node.scalar.size();
  if (first != last && *first == '+') ++first;
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || first == last) return {};
  return value;
}

std::optional<bool> parse_boolean(const RecipeNode& node) {
  if (node.type != RecipeNode::Type::scalar || node.quoted) return {};
  const std::string text = lowercase(node.scalar);
  if (text == "true" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "no" || text == "off") return false;
  return {};
}

std::optional<std::string> parse_string(const RecipeNode& node) {
  if (node.type != RecipeNode::Type::scalar) return {};
  return node.scalar;
}

}  // namespace

Config::Config() : node_(std::make_shared<RecipeNode>()) { node_->type = RecipeNode::Type::map; }

Config::Config(std::shared_ptr<RecipeNode> node, std::string path)
    : node_(std::move(node)), path_(std::move(path)) {
  if (!node_) {
    node_ = std::make_shared<RecipeNode>();
    node_->type = RecipeNode::Type::map;
  }
}

bool Config::empty() const { return node_->entries.empty(); }

std::string Config::key_path(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  if (key.empty()) return path_;
  return path_ + "." + std::string(key);
}

const RecipeNode* Config::child(std::string_view key) const {
  node_->known_keys.emplace(key);
  const RecipeEntry* entry = node_->find(key);
  if (!entry || entry->value->type == RecipeNode::Type::null) return nullptr;
  return entry->value.get();
}

SourceLocation Config::location(std::string_view key) const {
  if (key.empty()) return node_->where;
  const RecipeEntry* entry = node_->find(key);
  if (!entry) return node_->where;
  return entry->value->where.known() ? entry->value->where : entry->key_where;
}

void Config::fail(std::string_view key, const std::string& message, const std::string& hint) const {
  throw recipe_error(message, location(key), key_path(key), hint);
}

namespace {
// A key of the section that no reader has asked for and that is spelled like `key`: where a
// required option is missing, most likely the user's attempt at it ("treshold:").
// Short keys only by one character: "wd" is no misspelling of "lr".
std::optional<std::string> misspelling_of(const RecipeNode& section, std::string_view key) {
  const std::size_t tolerance = key.size() <= 4 ? 1 : key.size() / 3;
  for (const RecipeEntry& entry : section.entries) {
    if (section.known_keys.count(entry.key) == 0 && edit_distance(key, entry.key) <= tolerance) return entry.key;
  }
  return std::nullopt;
}

// Reads one typed value: absent -> fallback, noted in the section (or an error when
// required); wrong type -> an error at the value's location naming what was expected and
// what was found.
template <typename T, typename Parse>
T read(const Config& config, const RecipeNode& section, const RecipeNode* node, std::string_view key,
       const char* expected, Parse parse, const std::optional<T>& fallback) {
  if (!node) {
    if (fallback) {
      section.fallbacks_used.insert_or_assign(std::string(key), *fallback);
      return *fallback;
    }
    if (auto typo = misspelling_of(section, key)) {
      const std::string where = config.path().empty() ? "the recipe" : "'" + config.path() + "'";
      throw recipe_error("unknown key '" + *typo + "' in " + where + ", which misses the required option '" +
                             std::string(key) + "'",
                         section.find(*typo)->key_where,
                         config.path().empty() ? *typo : config.path() + "." + *typo,
                         "did you mean `" + std::string(key) + ":`?");
    }
    config.fail(key, "missing required option",
                "add `" + std::string(key) + ": <" + expected + ">` to this section");
  }
  try {
    if (auto value = parse(*node)) return *value;
  } catch (const TooCloseToZero&) {
    config.fail(key, quote_value(node->scalar) + " " + kTooCloseToZero,
                "write 0, or a number of magnitude 2.3e-308 or more");
  }
  config.fail(key, std::string("expected ") + expected + ", got " + describe_node(*node));
}

template <typename T, typename Parse>
std::vector<T> read_list(const Config& config, const RecipeNode& section, const RecipeNode* node,
                         std::string_view key, const char* expected, Parse parse, std::vector<T> fallback) {
  if (!node) {
    section.fallbacks_used.insert_or_assign(std::string(key), fallback);
    return fallback;
  }
  if (node->type != RecipeNode::Type::sequence) {
    config.fail(key, std::string("expected a list of ") + expected + ", got " + describe_node(*node));
  }
  // One shared bound for every list option: a million channels would take minutes and
  // gigabytes inside a plugin before anything said why.
  constexpr std::size_t kMaxItems = 10000;
  if (node->items.size() > kMaxItems) {
    config.fail(key, "the list has " + std::to_string(node->items.size()) + " items; an option takes at most " +
                         std::to_string(kMaxItems));
  }
  std::vector<T> values;
  const std::string path = config.path().empty() ? std::string(key) : config.path() + "." + std::string(key);
  for (const auto& item : node->items) {
    std::optional<T> value;
    try {
      value = parse(*item);
    } catch (const TooCloseToZero&) {
      throw recipe_error(quote_value(item->scalar) + " " + kTooCloseToZero, item->where, path,
                         "write 0, or a number of magnitude 2.3e-308 or more");
    }
    if (!value) {
      throw recipe_error(std::string("expected a list of ") + expected + ", but an item is " +
                             describe_node(*item),
                         item->where, path);
    }
    values.push_back(*value);
  }
  return values;
}
}  // namespace

// inf and NaN are YAML numbers, but no option means them, and NaN slips through every
// range check a plugin writes (`lr < 0` is false): both are errors here, for every plugin.
static std::string yaml_text(double value) { return std::isnan(value) ? ".nan" : value > 0 ? ".inf" : "-.inf"; }

static double finite(const Config& config, std::string_view key, double value) {
  if (!std::isfinite(value)) config.fail(key, "expected a finite number, got " + yaml_text(value));
  return value;
}

double Config::number(std::string_view key) const {
  return finite(*this, key, read<double>(*this, *node_, child(key), key, "a number", parse_number, std::nullopt));
}
std::int64_t Config::integer(std::string_view key) const {
  return read<std::int64_t>(*this, *node_, child(key), key, "an integer", parse_integer, std::nullopt);
}
std::string Config::string(std::string_view key) const {
  return read<std::string>(*this, *node_, child(key), key, "a string", parse_string, std::nullopt);
}
double Config::number(std::string_view key, double fallback) const {
  return finite(*this, key, read<double>(*this, *node_, child(key), key, "a number", parse_number, fallback));
}
std::int64_t Config::integer(std::string_view key, std::int64_t fallback) const {
  return read<std::int64_t>(*this, *node_, child(key), key, "an integer", parse_integer, fallback);
}
bool Config::boolean(std::string_view key, bool fallback) const {
  return read<bool>(*this, *node_, child(key), key, "true or false", parse_boolean, fallback);
}
std::string Config::string(std::string_view key, std::string fallback) const {
  return read<std::string>(*this, *node_, child(key), key, "a string", parse_string, fallback);
}
std::vector<double> Config::numbers(std::string_view key, std::vector<double> fallback) const {
  std::vector<double> values =
      read_list<double>(*this, *node_, child(key), key, "numbers", parse_number, std::move(fallback));
  for (const double value : values) {
    if (!std::isfinite(value)) fail(key, "expected a list of finite numbers, but an item is " + yaml_text(value));
  }
  return values;
}
std::vector<std::int64_t> Config::integers(std::string_view key,
                                           std::vector<std::int64_t> fallback) const {
  return read_list<std::int64_t>(*this, *node_, child(key), key, "integers", parse_integer,
                                 std::move(fallback));
}
std::vector<std::string> Config::strings(std::string_view key,
                                         std::vector<std::string> fallback) const {
  return read_list<std::string>(*this, *node_, child(key), key, "strings", parse_string, std::move(fallback));
}

bool Config::has(std::string_view key) const { return child(key) != nullptr; }

Config Config::section(std::string_view key) const {
  const RecipeNode* node = child(key);
  if (!node) {
    // An absent section has no text of its own: errors about it name the file that should
    // hold it ("recipe.yaml: data: missing section: data.train").
    // One set to null (`data=null` on the command line) names that override instead.
    auto absent = std::make_shared<RecipeNode>();
    absent->type = RecipeNode::Type::map;
    const RecipeEntry* nulled = node_->find(key);
    absent->where = nulled ? location(key) : SourceLocation{node_->where.file};
    return Config(absent, key_path(key));
  }
  if (!node->is_map()) fail(key, "expected a map, got " + describe_node(*node));
  node->opened = true;
  // The section shares the node (and its known-key bookkeeping) with the tree.
  return Config(node_->find(key)->value, key_path(key));
}

std::vector<Config> Config::sections(std::string_view key) const {
  const RecipeNode* node = child(key);
  if (!node) return {};
  auto as_section = [&](const RecipeNodePtr& item, const std::string& path) {
    if (item->is_map()) {
      item->opened = true;
      return Config(item, path);
    }
    if (item->type != RecipeNode::Type::scalar) {
      throw recipe_error("expected a name or a map, got " + describe_node(*item), item->where, path);
    }
    auto named = std::make_shared<RecipeNode>();  // the bare name `foo` as {name: foo}
    named->type = RecipeNode::Type::map;
    named->where = item->where;
    named->entries.push_back({"name", item->where, item});
    return Config(named, path);
  };
  const std::string path = key_path(key);
  if (node->type != RecipeNode::Type::sequence) return {as_section(node_->find(key)->value, path)};
  std::vector<Config> items;
  for (std::size_t i = 0; i < node->items.size(); ++i) {
    items.push_back(as_section(node->items[i], path + "[" + std::to_string(i) + "]"));
  }
  return items;
}

std::vector<std::string> Config::keys() const {
  std::vector<std::string> keys;
  for (const auto& entry : node_->entries) keys.push_back(entry.key);
  return keys;
}

}  // namespace mixt
