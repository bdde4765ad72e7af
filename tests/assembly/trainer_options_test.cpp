// The trainer's options: the keys TrainerOptions::read reads, `mixt describe trainer` lists
// and docs/recipes.md tabulates are the same.
#include "assembly/trainer_options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "mixt/plugin.h"
#include "plugins/option_table.h"
#include "doc_tables.h"
#include "recipe/recipe_loader.h"
#include "recipe/recipe_node.h"
#include "test_support.h"

namespace mixt {
namespace {

// The rows "| `key` | default | meaning |" of the table under `heading` in docs/`document`:
// key -> the default as written there.
std::map<std::string, std::string> documented_defaults(const std::string& document, const std::string& heading) {
  const std::string doc = testing::read_file(fs::path(testing::configured::source_dir()) / "docs" / document);
  const auto start = doc.find(heading);
  EXPECT_NE(start, std::string::npos) << heading;
  if (start == std::string::npos) return {};
  std::istringstream table(doc.substr(start, doc.find("\n## ", start) - start));
  std::map<std::string, std::string> rows;
  for (std::string line; std::getline(table, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const auto key_end = line.find('`', 3);
    const auto cell_start = line.find('|', key_end) + 1;
    std::string cell = line.substr(cell_start, line.find('|', cell_start) - cell_start);
    cell.erase(std::remove(cell.begin(), cell.end(), '`'), cell.end());
    std::istringstream words(cell);
    words >> cell;  // `""` (none) is ""
    rows[line.substr(3, key_end - 3)] = cell;
  }
  return rows;
}

// The same value however it is written: 0 and 0.0, 600 and 600.0.
bool same_default(const std::string& documented, const std::string& declared) {
  if (documented == declared) return true;
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double a = std::strtod(documented.c_str(), &end_a), b = std::strtod(declared.c_str(), &end_b);
  return !documented.empty() && !declared.empty() && *end_a == '\0' && *end_b == '\0' && a == b;
}

// `mixt describe trainer` (these OptionDocs) and TrainerOptions::read name the same keys, and
// the tables of docs/recipes.md and docs/distributed.md give each of them with the default
// mixt uses: an option added to one place and not the others, or a default changed in the
// code and not in the docs, fails here.
TEST(TrainerOptionDocs, NameEveryKeyTheTrainerReadsAndTheDocsTablesGiveItsDefault) {
  const RecipeNodePtr root = parse_yaml("trainer: {distributed: {}}", "test");
  TrainerOptions::read(Config(root, "").section("trainer"));
  const RecipeNode& trainer = *root->find("trainer")->value;
  std::set<std::string> read, documented;
  for (const auto& key : trainer.known_keys) {
    if (key != "distributed") read.insert(key);
  }
  for (const auto& key : trainer.find("distributed")->value->known_keys) read.insert("distributed." + key);
  for (const OptionDoc& option : trainer_option_docs()) {
    documented.insert(option.name);
  }
  EXPECT_EQ(documented, read);

  const auto trainer_table = documented_defaults("recipes.md", "### `trainer`");
  const auto distributed_table = documented_defaults("distributed.md", "## The recipe: `trainer.distributed`");
  std::set<std::string> in_tables;
  for (const auto& [key, value] : trainer_table) in_tables.insert(key);
  for (const auto& [key, value] : distributed_table) in_tables.insert("distributed." + key);
  in_tables.erase("distributed");  // recipes.md's row that points at distributed.md
  EXPECT_EQ(in_tables, documented);
  for (const OptionDoc& option : trainer_option_docs()) {
    const bool nested = option.name.rfind("distributed.", 0) == 0;
    const auto& table = nested ? distributed_table : trainer_table;
    const auto row = table.find(nested ? option.name.substr(12) : option.name);
    if (row == table.end()) continue;  // reported above
    EXPECT_TRUE(same_default(row->second, option.default_value))
        << option.name << ": the docs say " << row->second << ", mixt describe says " << option.default_value;
  }
}

// The docs' tables are the declarations written out (option_table_rows): a key's default or
// meaning changed in one place and not the other fails here, printing the rows to paste.
TEST(TrainerOptionDocs, TheDocsTablesAreTheDeclarationsWrittenOut) {
  std::vector<OptionDoc> trainer, distributed;
  for (OptionDoc option : trainer_option_docs()) {
    if (option.name.rfind("distributed.", 0) == 0) {
      option.name = option.name.substr(12);
      distributed.push_back(option);
    } else {
      trainer.push_back(option);
    }
  }
  const std::string trainer_rows = option_table_rows(trainer);
  EXPECT_EQ(testing::doc_table_rows("recipes.md", "### `trainer`", "distributed"), trainer_rows)
      << "docs/recipes.md's trainer table should read:\n" << trainer_rows;
  const std::string distributed_rows = option_table_rows(distributed);
  EXPECT_EQ(testing::doc_table_rows("distributed.md", "## The recipe: `trainer.distributed`"), distributed_rows)
      << "docs/distributed.md's table should read:\n" << distributed_rows;
}

}  // namespace
}  // namespace mixt
