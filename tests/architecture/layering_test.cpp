// The folders of framework/src form layers: a file may include headers of its own folder
// and of folders drawn below its own in docs/architecture.md ("Layers"), never above or
// beside. A strict order has no circles, so an include that would close one fails here,
// naming the file, the line and the folders.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "configured_paths.h"

namespace mixt {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = mixt::testing::configured::source_dir();

// The drawing's layers, top first: each line of the fenced block after the "## Layers"
// heading names one or more folders (the line's words before any '(').
std::vector<std::vector<std::string>> drawn_layers(const fs::path& architecture_md) {
  std::ifstream in(architecture_md);
  std::string line;
  bool in_section = false, in_block = false;
  std::vector<std::vector<std::string>> layers;
  while (std::getline(in, line)) {
    if (!in_section) {
      in_section = line == "## Layers";
      continue;
    }
    if (line.rfind("```", 0) == 0) {
      if (in_block) break;
      in_block = true;
      continue;
    }
    if (!in_block) continue;
    std::istringstream words(line.substr(0, line.find('(')));
    std::vector<std::string> layer;
    for (std::string word; words >> word;)
      if (word != "↓" && word != "framework/cli") layer.push_back(word);
    if (!layer.empty()) layers.push_back(layer);
  }
  return layers;
}

struct Include {
  fs::path file;  // relative to the source root
  int line = 0;
  std::string text;    // what the file includes, e.g. "train/trainer.h"
  std::string folder;  // the folder of framework/src that header is in
};

// Every `#include "folder/…"` under `dir` that reaches one of `folders`.
std::vector<Include> includes_of_folders(const fs::path& dir, const std::set<std::string>& folders) {
  static const std::regex quoted(R"(^\s*#\s*include\s*"([^"/]+)/[^"]*")");
  std::vector<Include> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch match;
      if (std::regex_search(line, match, quoted) && folders.count(match[1].str()))
        found.push_back({fs::relative(entry.path(), kSource), number,
                         line.substr(line.find('"')), match[1].str()});
    }
  }
  return found;
}

std::set<std::string> source_folders() {
  std::set<std::string> folders;
  for (const auto& entry : fs::directory_iterator(kSource / "framework/src"))
    if (entry.is_directory()) folders.insert(entry.path().filename().string());
  return folders;
}

class Layering : public ::testing::Test {
 protected:
  void SetUp() override {
    layers_ = drawn_layers(kSource / "docs/architecture.md");
    ASSERT_FALSE(layers_.empty()) << "docs/architecture.md has no \"## Layers\" drawing";
    for (std::size_t depth = 0; depth < layers_.size(); ++depth)
      for (const auto& folder : layers_[depth]) height_[folder] = static_cast<int>(layers_.size() - depth);
  }
  std::vector<std::vector<std::string>> layers_;
  std::map<std::string, int> height_;  // the bottom layer is 1
};

TEST_F(Layering, TheDrawingNamesEveryFolderOfFrameworkSrcOnce) {
  std::vector<std::string> drawn;
  for (const auto& layer : layers_) drawn.insert(drawn.end(), layer.begin(), layer.end());
  std::vector<std::string> sorted = drawn;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a folder drawn twice";
  const auto folders = source_folders();
  EXPECT_EQ(std::set<std::string>(drawn.begin(), drawn.end()), folders)
      << "docs/architecture.md's Layers drawing and the folders of framework/src differ";
}

TEST_F(Layering, EveryIncludeGoesDownTheLayers) {
  const auto folders = source_folders();
  std::vector<std::string> upward;
  for (const auto& folder : folders) {
    if (!height_.count(folder)) continue;  // reported by the test above
    for (const auto& include : includes_of_folders(kSource / "framework/src" / folder, folders)) {
      if (include.folder == folder || height_[include.folder] < height_[folder]) continue;
      // Does the other folder already reach this one? Then this include closes a circle.
      bool circle = false;
      for (const auto& back : includes_of_folders(kSource / "framework/src" / include.folder, folders))
        circle = circle || back.folder == folder;
      upward.push_back(include.file.string() + ":" + std::to_string(include.line) + ": " + folder +
                       "/ includes " + include.text + " from " + include.folder + "/, " +
                       (height_[include.folder] == height_[folder] ? "a folder beside it"
                                                                   : "a folder above it") +
                       (circle ? " (and " + include.folder + "/ includes " + folder + "/: a circle)" : ""));
    }
  }
  EXPECT_THAT(upward, ::testing::IsEmpty())
      << "move the shared piece down a layer (common/ holds what every stage shares), or draw the "
         "layers anew in docs/architecture.md";
}

// The SDK is what plugins build against: it can include nothing of libmixt's insides.
TEST_F(Layering, TheSdkHeadersIncludeOnlyTheSdk) {
  std::vector<std::string> inward;
  for (const auto& include : includes_of_folders(kSource / "framework/include/mixt", source_folders()))
    inward.push_back(include.file.string() + ":" + std::to_string(include.line) + ": " + include.text);
  EXPECT_THAT(inward, ::testing::IsEmpty());
}

}  // namespace
}  // namespace mixt
