// Recipes as hostile or accidental input: what a small file can make mixt do is bounded in
// memory and time, and each bound is a recipe error that names the file and the limit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "expect_error.h"
#include "mixt/config.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

std::string error_of(const std::function<void()>& f) {
  const Error e = testing::thrown_error(f);
  return e.where().str() + ": " + e.message();
}

// Nine levels of nine aliases each: 9^9 (387 million) values from under a kilobyte.
TEST(HostileRecipe, AnAliasBombIsARecipeErrorNotAnAllocationFailure) {
  TempDir dir;
  std::string text = "l0: &l0 [x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 8; ++level) {
    const std::string previous = "*l" + std::to_string(level - 1);
    text += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 9; ++i) text += (i ? ", " : "") + previous;
    text += "]\n";
  }
  const fs::path file = dir.write("bomb.yaml", text);
  EXPECT_LT(fs::file_size(file), 1000u);
  const std::string error = error_of([&] { load_recipe(file); });
  EXPECT_THAT(error, HasSubstr("bomb.yaml: the recipe expands to more than 100000 values"));
}

// Each level merges the one before it twice: 2^29 copies of the first map.
TEST(HostileRecipe, AMergeKeyBombStopsAtTheBoundQuickly) {
  TempDir dir;
  std::string text = "m0: &m0 {a: 1}\n";
  for (int level = 1; level <= 29; ++level) {
    const std::string previous = "*m" + std::to_string(level - 1);
    text += "m" + std::to_string(level) + ": &m" + std::to_string(level) + " {<<: [" + previous + "], k" +
            std::to_string(level) + ": {<<: " + previous + "}}\n";
  }
  const fs::path file = dir.write("merge.yaml", text);
  const auto start = std::chrono::steady_clock::now();
  const std::string error = error_of([&] { load_recipe(file); });
  EXPECT_THAT(error, HasSubstr("expands to more than 100000 values"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Whether `action` ends within `limit`, run in a child process that is killed otherwise (a
// loop that never ends cannot be stopped in a thread).
bool ends_within(std::chrono::seconds limit, const std::function<void()>& action) {
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      action();
    } catch (...) {
    }
    std::_Exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return false;
}

// yaml-cpp 0.7 reads endless empty documents at a ',' outside [ ] or { } (found by
// fuzz/recipe_fuzz.cpp: a one-byte recipe ran forever). Each is a syntax error at the comma.
TEST(HostileRecipe, ACommaOutsideAListIsASyntaxErrorNotALoopWithoutEnd) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {{",", "comma.yaml:1:1"},
                                                                  {"# a comment\n, x", "comma.yaml:2:1"},
                                                                  {"[a]\n,", "comma.yaml:2:1"},
                                                                  {"&anchor ,", "comma.yaml:1:9"},
                                                                  {"a: 1\n---\n,", "comma.yaml:3:1"}};
  for (const auto& [text, where] : cases) {
    const fs::path file = dir.write("comma.yaml", text);
    ASSERT_TRUE(ends_within(std::chrono::seconds(10), [&] { load_recipe(file); })) << text;
    const std::string error = error_of([&] { load_recipe(file); });
    EXPECT_THAT(error, HasSubstr(where)) << text;
    EXPECT_THAT(error, HasSubstr("YAML syntax error: unexpected ','")) << text;
  }
}

// 45,000 keys in a base and 45,000 more in the recipe: reading, checking for duplicates and
// merging are linear in the keys (each was a search of the map: about 20 s here).
TEST(HostileRecipe, ManyKeysAreReadAndMergedInLinearTime) {
  TempDir dir;
  std::string base, recipe = "base: base.yaml\n";
  for (int i = 0; i < 45000; ++i) {
    base += "b" + std::to_string(i) + ": 1\n";
    recipe += "r" + std::to_string(i) + ": 2\n";
  }
  dir.write("base.yaml", base);
  const fs::path file = dir.write("r.yaml", recipe);
  const auto start = std::chrono::steady_clock::now();
  const Recipe loaded = load_recipe(file);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(loaded.config().string("b44999"), "1");
  EXPECT_EQ(loaded.config().string("r44999"), "2");
  const std::string error = error_of([&] { load_recipe(dir.write("dup.yaml", "a: 1\nb: 2\na: 3\n")); });
  EXPECT_THAT(error, HasSubstr("dup.yaml:3:1: duplicate key 'a'"));
}

// d1 names d0 twice, d2 names d1 twice, ...: 2^40 loads without each file merged once.
TEST(HostileRecipe, ADiamondOfBasesIsReadInTimeLinearInItsFiles) {
  TempDir dir;
  dir.write("d0.yaml", "trainer: {epochs: 1}\n");
  for (int n = 1; n <= 30; ++n) {
    const std::string previous = "d" + std::to_string(n - 1) + ".yaml";
    dir.write("d" + std::to_string(n) + ".yaml", "base: [" + previous + ", " + previous + "]\nk" +
                                                     std::to_string(n) + ": " + std::to_string(n) + "\n");
  }
  const auto start = std::chrono::steady_clock::now();
  const Recipe recipe = load_recipe(dir.path() / "d30.yaml");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(recipe.config().section("trainer").string("epochs"), "1");
  EXPECT_EQ(recipe.config().string("k30"), "30");
}

TEST(HostileRecipe, ABaseChainDeeperThanTheBoundIsARecipeError) {
  TempDir dir;
  dir.write("c0.yaml", "trainer: {epochs: 1}\n");
  for (int n = 1; n <= 40; ++n) {
    dir.write("c" + std::to_string(n) + ".yaml", "base: c" + std::to_string(n - 1) + ".yaml\n");
  }
  const std::string error = error_of([&] { load_recipe(dir.path() / "c40.yaml"); });
  EXPECT_THAT(error, HasSubstr("base: chains more than 32 files deep"));
  EXPECT_NO_THROW(load_recipe(dir.path() / "c30.yaml"));
}

TEST(HostileRecipe, DevicesAndFifosAreNotRecipes) {
  EXPECT_THAT(error_of([] { load_recipe("/dev/zero"); }), HasSubstr("/dev/zero: not a regular file"));
  TempDir dir;
  const fs::path fifo = dir.path() / "r.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO without a writer would block: the check comes before the open.
  EXPECT_THAT(error_of([&] { load_recipe(fifo); }), HasSubstr("not a regular file"));
}

TEST(HostileRecipe, AFileLargerThanARecipeCanBeIsRefused) {
  TempDir dir;
  const fs::path file = dir.write("big.yaml", "a: \"" + std::string(2 << 20, 'x') + "\"\n");
  EXPECT_THAT(error_of([&] { load_recipe(file); }), HasSubstr("big.yaml: the file is larger than 1 MiB"));
}

TEST(HostileRecipe, EchoedValuesAreCut) {
  TempDir dir;
  const std::string huge(100000, '7');
  const fs::path file = dir.write("r.yaml", "optimizer: {lr: \"" + huge + "x\"}\n");
  const Recipe recipe = load_recipe(file);
  const std::string error = error_of([&] { recipe.config().section("optimizer").number("lr"); });
  EXPECT_THAT(error, HasSubstr("expected a number, got \"" + std::string(80, '7') + "...\" (100001 characters)"))
      << error.substr(0, 300);
  EXPECT_LT(error.size(), 300u);
}

TEST(HostileRecipe, ANonZeroNumberThatRoundsToZeroIsARecipeError) {
  TempDir dir;
  const Recipe recipe = load_recipe(dir.write("r.yaml", "optimizer: {lr: 1e-400, eps: 1e-310, zero: 0.0e-400, "
                                                        "betas: [0.9, 1e-999]}\n"));
  const Config optimizer = recipe.config().section("optimizer");
  EXPECT_THAT(error_of([&] { optimizer.number("lr"); }), HasSubstr("r.yaml:1:17: \"1e-400\" is too close to zero"));
  EXPECT_THAT(error_of([&] { optimizer.number("eps", 1e-8); }), HasSubstr("is too close to zero"));
  EXPECT_EQ(optimizer.number("zero"), 0.0);  // zero written as zero is zero
  EXPECT_THAT(error_of([&] { optimizer.numbers("betas", {}); }), HasSubstr("\"1e-999\" is too close to zero"));
}

TEST(HostileRecipe, ListOptionsAreBounded) {
  TempDir dir;
  std::string channels = "[1";
  for (int i = 0; i < 20000; ++i) channels += ", 1";
  const Recipe recipe = load_recipe(dir.write("r.yaml", "model: {channels: " + channels + "]}\n"));
  EXPECT_THAT(error_of([&] { recipe.config().section("model").integers("channels", {}); }), HasSubstr("the list has 20001 items; an option takes at most 10000"));
}

}  // namespace
}  // namespace mixt
