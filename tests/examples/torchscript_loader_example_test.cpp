// examples/torchscript_loader, a C++ program on LibTorch alone (no mixt header, no libmixt),
// built out of tree from the installed copy with the commands of docs/deploy.md: it loads the
// TorchScript file `mixt export` wrote for a short run on image folders, preprocesses images as
// the file's metadata says, and prints the top-5 classes by name that `mixt predict --image`
// prints for the same images.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "data_support.h"
#include "example_environment.h"
#include "test_support.h"

namespace mixt {
namespace {

// Evaluation transforms with a resize and a crop that change the 64x64 images, and a mean and
// std of their own, so that the program must read each from the metadata.
const std::string kRecipe = R"(name: garments
model:     { name: simple_cnn, channels: [8, 16], hidden: 32 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.05, momentum: 0.9 }
data:
  train:
    name: image_folder
    root: images
    batch_size: 10
    workers: 0
    transforms: [{name: random_resized_crop, size: 32, scale: [0.6, 1.0]}, to_tensor, normalize]
  val:
    name: image_folder
    root: images
    batch_size: 10
    workers: 0
    transforms: [{name: resize, size: 36}, {name: center_crop, size: 32}, to_tensor, {name: normalize, mean: [0.3, 0.3, 0.3], std: [0.35, 0.35, 0.35]}]
trainer: { epochs: 4, seed: 0, threads: 1 }
output: runs
)";

// A PNG, a BMP and two JPEGs of the fixture tree (tests/fixtures/data/make_image_folder.py).
const std::vector<std::string> kImages = {"images/coat/000.png", "images/trouser/001.bmp", "images/bag/002.jpg",
                                          "images/sneaker/003.jpg"};

struct Ranked {
  std::int64_t index = -1;
  std::string name;
  double probability = 0;
};

// The program's lines "  <rank> <index> <probability> <class>" under each image's path.
std::map<std::string, std::vector<Ranked>> parse_loader(const std::string& output) {
  std::map<std::string, std::vector<Ranked>> out;
  std::istringstream lines(output);
  std::string image;
  const std::regex row(R"(^  (\d+) (\d+) ([0-9.]+) (.*)$)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, row)) {
      out[image].push_back({std::stoll(m[2]), m[4], std::stod(m[3])});
    } else if (line.rfind("images/", 0) == 0 || line.find("/images/") != std::string::npos) {
      image = line.substr(line.find("images/"));
    }
  }
  return out;
}

TEST(TorchscriptLoaderExample, BuildsAgainstLibTorchAloneAndPrintsMixtPredictsTopFive) {
  TempDir dir;
  testing::run_fixture_script("make_image_folder.py",
                              testing::shell_quote((dir.path() / "images").string()) + " --per-class 8");
  dir.write("garments.yaml", kRecipe);
  const CommandResult run = run_mixt({"run", "garments.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::path run_dir;
  for (const auto& entry : fs::directory_iterator(dir.path() / "runs" / "garments")) run_dir = entry.path();
  const CommandResult exported = run_mixt({"export", run_dir.string(), "-o", "model.pt"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  // mixt's answer, at one thread as the program runs.
  std::vector<std::string> predict = {"predict", run_dir.string(), "--json"};
  for (const std::string& image : kImages) {
    predict.push_back("--image");
    predict.push_back(image);
  }
  const CommandResult predicted = run_mixt(predict, dir.path(), "OMP_NUM_THREADS=1");
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  const auto start = predicted.output.find("{\n");
  ASSERT_NE(start, std::string::npos) << predicted.output;
  const nlohmann::json report =
      nlohmann::json::parse(predicted.output.substr(start, predicted.output.rfind('}') - start + 1));

  // The program, built and run as docs/deploy.md shows, on the same images.
  std::string images;
  for (const std::string& image : kImages) images += " " + testing::shell_quote((dir.path() / image).string());
  const std::string script = testing::on_shared_install(
      testing::replace_once(
          testing::replace_once(testing::documented_commands("docs/deploy.md", "torchscript_loader"), "python3 -c",
                                testing::shell_quote(MIXT_PYTHON) + " -c"),
          "build/torchscript_loader model.pt image.png",
          "build/torchscript_loader " + testing::shell_quote((dir.path() / "model.pt").string()) + images),
      dir.path());
  std::string environment =
      testing::example_environment(dir.path()) + " OMP_NUM_THREADS=1 CXXFLAGS='-Wall -Wextra -Werror'";
  if (!std::string(MIXT_CUDA_TOOLKIT_ROOT).empty()) environment += " CUDA_HOME=" + std::string(MIXT_CUDA_TOOLKIT_ROOT);
  const CommandResult loaded = testing::run_shell(script, dir.path(), environment);
  ASSERT_EQ(loaded.exit_code, 0) << script << "\n" << loaded.output;
  // The metadata's transforms, as the program understood them.
  EXPECT_THAT(loaded.output, HasSubstr("preprocessing: resize(36) -> center_crop(32x32) -> to_tensor -> normalize"));
  // Built against LibTorch only: nothing of mixt in its link line.
  const std::string links = testing::read_file(dir.path() / "torchscript_loader/build/build.ninja");
  EXPECT_THAT(links, Not(HasSubstr("libmixt")));

  const auto printed = parse_loader(loaded.output);
  ASSERT_EQ(report["predictions"].size(), kImages.size()) << predicted.output;
  for (const auto& prediction : report["predictions"]) {
    const std::string image = prediction["image"];
    SCOPED_TRACE(image);
    ASSERT_TRUE(printed.count(image)) << loaded.output;
    const std::vector<Ranked>& top = printed.at(image);
    ASSERT_EQ(top.size(), 5u) << loaded.output;
    ASSERT_EQ(prediction["top"].size(), 5u);
    for (std::size_t r = 0; r < 5; ++r) {
      EXPECT_EQ(top[r].index, prediction["top"][r]["index"].get<std::int64_t>()) << loaded.output;
      EXPECT_EQ(top[r].name, prediction["top"][r]["class"].get<std::string>());
      // The same decoder, transforms and forward: equal up to the 8 digits printed.
      EXPECT_NEAR(top[r].probability, prediction["top"][r]["probability"].get<double>(), 1e-7);
    }
  }
  // Ranks 1e-5 apart or more: the order compared is the model's, not a tie broken by rounding.
  for (const auto& [image, top] : printed) {
    for (std::size_t r = 1; r < top.size(); ++r) EXPECT_GT(top[r - 1].probability - top[r].probability, 1e-5) << image;
  }
}

}  // namespace
}  // namespace mixt
