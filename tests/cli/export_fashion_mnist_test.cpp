// End to end on Fashion-MNIST: a short run of simple_cnn, its checkpoint exported to ONNX and
// TorchScript, and each file's top-1 over the whole test set (10,000 images, scored by ONNX
// Runtime and torch.jit.load in tests/support/fashion_mnist_onnx_reference.py) equal to
// `mixt evaluate`'s on the same checkpoint: the same count of correct images, class by class.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace mixt {
namespace {

const std::string kRecipe = R"(name: fashion-mnist-export
model:     { name: simple_cnn, channels: [8, 16], hidden: 32 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.05, momentum: 0.9 }
data:
  train: { name: fashion_mnist, split: train, batch_size: 64 }
  val:   { name: fashion_mnist, split: test, batch_size: 1000 }
trainer: { epochs: 1, max_steps_per_epoch: 40, seed: 0, threads: 2, log_every: 20 }
output: runs
)";

// The recipe leaves the preprocessing to datasets/fashion_mnist's defaults (normalize: true);
// the reference takes it from the exported file's metadata, as a deployer would.
constexpr const char* kRoot = "/usr/share/datasets/fashion-mnist";

TEST(ExportFashionMnist, OnnxRuntimeTop1OverTheTestSetEqualsMixtEvaluate) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  const CommandResult run = run_mixt({"run", "r.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::path run_dir;
  for (const auto& entry : fs::directory_iterator(dir.path() / "runs" / "fashion-mnist-export")) run_dir = entry.path();
  for (const char* file : {"m.onnx", "m.pt"}) {
    const CommandResult exported = run_mixt({"export", run_dir.string(), "-o", file}, dir.path());
    ASSERT_EQ(exported.exit_code, 0) << file << ":\n" << exported.output;
  }

  const CommandResult evaluated = run_mixt({"evaluate", run_dir.string(), "--json"}, dir.path());
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  const auto start = evaluated.output.find("{\n");
  ASSERT_NE(start, std::string::npos) << evaluated.output;
  const nlohmann::json report =
      nlohmann::json::parse(evaluated.output.substr(start, evaluated.output.rfind('}') - start + 1));
  ASSERT_EQ(report["samples"], 10000);
  std::vector<std::int64_t> per_class;
  std::int64_t correct = 0;
  for (const auto& c : report["per_class"]) {
    per_class.push_back(c["correct"].get<std::int64_t>());
    correct += per_class.back();
  }

  const fs::path results = dir.path() / "reference.json";
  const CommandResult reference = testing::run_command(
      testing::shell_quote(MIXT_PYTHON) + " " +
      testing::shell_quote((testing::source_dir() / "tests/support/fashion_mnist_onnx_reference.py").string()) + " " +
      testing::shell_quote((dir.path() / "m.onnx").string()) + " " +
      testing::shell_quote((dir.path() / "m.pt").string()) + " " + kRoot + " " +
      testing::shell_quote(results.string()));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const nlohmann::json r = nlohmann::json::parse(testing::read_file(results));
  ASSERT_EQ(r["samples"], 10000);
  // The dataset's own mean and std (its training set's), read back from the metadata.
  EXPECT_EQ(r["described"], "28x28 grey, pixel values / 255 -> normalize(mean=0.286, std=0.353)");
  EXPECT_EQ(r["mean"].get<double>(), 0.2860);
  EXPECT_EQ(r["std"].get<double>(), 0.3530);
  // 40 steps learn something (5,191 correct measured; chance is 1,000): the counts compared are
  // not those of a constant answer.
  EXPECT_GT(correct, 3000);
  for (const char* runtime : {"onnxruntime", "torchscript"}) {
    SCOPED_TRACE(runtime);
    EXPECT_EQ(r[runtime]["correct"].get<std::int64_t>(), correct)
        << r[runtime]["near_ties"] << " images have their two best logits within 1e-4";
    EXPECT_EQ(r[runtime]["per_class_correct"].get<std::vector<std::int64_t>>(), per_class);
  }
  std::cout << "[ measured ] Fashion-MNIST test set, top-1 correct: mixt evaluate " << correct << ", ONNX Runtime "
            << r["onnxruntime"]["correct"] << ", torch.jit.load " << r["torchscript"]["correct"] << " (near ties "
            << r["onnxruntime"]["near_ties"] << ")\n";
}

}  // namespace
}  // namespace mixt
