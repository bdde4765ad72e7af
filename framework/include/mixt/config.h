// mixt/config.h — a component's section of the recipe.
//
// A factory receives its section (e.g. `optimizer: {name: sgd, lr: 0.1}`) as a Config and
// reads its options through the typed getters below. Every getter records the key as
// known: after all components are built, any key in the recipe that nobody asked for is
// reported as an error with the closest known key suggested. Values that do not convert
// are reported at their file:line:column with the full key path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mixt/error.h"

namespace mixt {

struct RecipeNode;  // the parsed recipe tree; defined inside libmixt

class Config {
 public:
  Config();  // an empty section: every getter returns its fallback
  Config(std::shared_ptr<RecipeNode> node, std::string path);

  // Required options: a missing key is a recipe error naming the section. Numbers are
  // finite: .inf and .nan (also in numbers()) are recipe errors.
  double number(std::string_view key) const;
  std::int64_t integer(std::string_view key) const;
  std::string string(std::string_view key) const;

  // Options with a default.
  double number(std::string_view key, double fallback) const;
  std::int64_t integer(std::string_view key, std::int64_t fallback) const;
  bool boolean(std::string_view key, bool fallback) const;
  std::string string(std::string_view key, std::string fallback) const;
  std::vector<double> numbers(std::string_view key, std::vector<double> fallback) const;
  std::vector<std::int64_t> integers(std::string_view key, std::vector<std::int64_t> fallback) const;
  std::vector<std::string> strings(std::string_view key, std::vector<std::string> fallback) const;

  // True when the key is present (and not null). Marks the key as known.
  bool has(std::string_view key) const;
  // A nested map; an empty Config when absent. Marks the key as known.
  Config section(std::string_view key) const;
  // A list of maps (e.g. `transforms:`), each item as a Config whose path is "key[i]".
  // A bare scalar item `foo` — or a bare scalar instead of the list — reads as
  // {name: foo}. Absent: an empty list. Unknown keys inside items are reported like any.
  std::vector<Config> sections(std::string_view key) const;
  // Keys present in this section, in recipe order (e.g. to iterate `data:`).
  std::vector<std::string> keys() const;

  // "optimizer", "data.train", ...: where this section sits in the recipe.
  const std::string& path() const { return path_; }
  // Where the key (or, with an empty key, this section) was written.
  SourceLocation location(std::string_view key = {}) const;
  // Throws a recipe error located at the key's value ("file:3:7: optimizer.lr: ...").
  [[noreturn]] void fail(std::string_view key, const std::string& message,
                         const std::string& hint = {}) const;

  bool empty() const;

 private:
  friend struct ConfigTree;  // libmixt's own way to the tree (model.from fills a model's options)
  const RecipeNode* child(std::string_view key) const;
  std::string key_path(std::string_view key) const;

  std::shared_ptr<RecipeNode> node_;
  std::string path_;
};

}  // namespace mixt
