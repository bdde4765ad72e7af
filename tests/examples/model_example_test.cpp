// examples/residual_cnn (a convolutional model routed for fp32 regions and activation
// checkpointing, with mixt::BatchNorm2d) built out of tree from the installed copy, with the
// commands of docs/plugins.md ("A model"): `mixt check` prints what the document shows, and
// the recipe trains with its blocks recomputed and its head in float32. Then the trained
// out-of-tree model, exported to ONNX and TorchScript, computes what mixt's eager forward does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "example_environment.h"
#include "export_checks.h"
#include "test_support.h"

namespace mixt {
namespace {

// The ```text block of docs/plugins.md that shows `mixt check`'s lines for the example.
std::string documented_check_lines() {
  const std::string doc = testing::read_file(fs::path(testing::configured::source_dir()) / "docs/plugins.md");
  const auto marker = doc.find("<!-- e2e: residual_cnn -->");
  const auto begin = doc.rfind("```text\n", marker) + 8;
  return doc.substr(begin, doc.find("```", begin) - begin);
}

// The run's checkpoint exported by the installed mixt to the three formats, held by
// export_reference.py to `mixt predict --input` (the eager forward) at batches other than the
// trace's: ONNX Runtime within 1e-4, torch.jit.load bit for bit (one thread each).
void expect_exports_match_the_eager_forward(const fs::path& run, const fs::path& example, const std::string& home,
                                            const fs::path& mixt) {
  TempDir out;
  for (const char* file : {"m.onnx", "m.pt", "m.safetensors"}) {
    const CommandResult exported =
        testing::run_shell(testing::shell_quote(mixt.string()) + " export " + testing::shell_quote(run.string()) +
                               " -o " + testing::shell_quote((out.path() / file).string()),
                           example, home);
    ASSERT_EQ(exported.exit_code, 0) << file << ":\n" << exported.output;
  }
  const std::vector<std::int64_t> batches{1, 3, 8};
  NamedTensors data;
  ASSERT_NO_FATAL_FAILURE(testing::predicted_batches(out.path(), run.string(), {1, 28, 28}, batches, 11, data, mixt));
  save_safetensors(out.path() / "data.safetensors", data);
  out.write("manifest.json", nlohmann::json::array({{{"name", "residual_cnn"},
                                                     {"data", (out.path() / "data.safetensors").string()},
                                                     {"batches", batches},
                                                     {"onnx", (out.path() / "m.onnx").string()},
                                                     {"torchscript", (out.path() / "m.pt").string()},
                                                     {"safetensors", (out.path() / "m.safetensors").string()}}})
                                 .dump());
  const nlohmann::json r = testing::run_export_reference(out.path() / "manifest.json").at("residual_cnn");
  ASSERT_FALSE(r.contains("error")) << r["error"];
  EXPECT_EQ(r["checker"], "ok");
  EXPECT_GT(r["expected_max_abs"].get<double>(), 0.05);  // real logits, not a comparison of zeros
  ASSERT_TRUE(r["onnx_max_diff"].is_number()) << r["onnx_max_diff"];
  EXPECT_LE(r["onnx_max_diff"].get<double>(), 1e-4 * std::max(1.0, r["expected_max_abs"].get<double>()));
  ASSERT_TRUE(r["torchscript_max_diff"].is_number()) << r["torchscript_max_diff"];
  EXPECT_EQ(r["torchscript_max_diff"].get<double>(), 0.0);
  EXPECT_GT(r["initializers_checked"].get<int>(), 0);
  EXPECT_EQ(r["initializers_mismatched"], nlohmann::json::array());
  EXPECT_EQ(r["inputs"][0][0], "batch");
  // The plugin's own parameter names, as its module tree registers them.
  EXPECT_THAT(r["torchscript_state_dict"].dump(), HasSubstr("blocks.0.conv1.weight"));
  const nlohmann::json classes = nlohmann::json::parse(r["metadata"]["mixt.classes"].get<std::string>());
  ASSERT_EQ(classes.size(), 10u);
  EXPECT_EQ(classes[9], "Ankle boot");
  EXPECT_EQ(r["torchscript_metadata"]["mixt.recipe"], "residual_cnn");
  std::cout << "[ measured ] residual_cnn (out of tree): logits up to " << r["expected_max_abs"] << "; ONNX Runtime "
            << r["onnx_max_diff"] << ", torch.jit.load " << r["torchscript_max_diff"] << "\n";
}

// One test: under ctest each test is a process of its own, and building and training the
// example is most of its time.
TEST(ModelExample, ResidualCnnBuildsFromTheInstalledCopyTrainsAsDocumentedAndExports) {
  TempDir dir;
  const std::string shorter = " trainer.max_steps_per_epoch=30 model.width=16 data.val.limit=500";
  const std::string script =
      testing::on_shared_install(testing::replace_once(testing::documented_commands("docs/plugins.md", "residual_cnn"),
                                                       "run recipe.yaml", "run recipe.yaml" + shorter),
                                 dir.path());
  const std::string home = testing::example_environment(dir.path());
  const CommandResult result = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(result.exit_code, 0) << script << "\n" << result.output;

  const std::string lines = documented_check_lines();
  ASSERT_THAT(lines, HasSubstr("routed")) << "docs/plugins.md lost the example's check lines";
  EXPECT_THAT(result.output, HasSubstr(lines)) << result.output;
  EXPECT_THAT(result.output, HasSubstr("activation checkpointing: 3 submodules recomputed in the backward pass "
                                       "(blocks.0, blocks.1, blocks.2)"))
      << result.output;
  std::smatch accuracy;
  ASSERT_TRUE(std::regex_search(result.output, accuracy, std::regex(R"(test accuracy: ([0-9.]+)%)"))) << result.output;
  // 30 steps: it learns (chance is 10%; 38.6% on an AMD EPYC with avx512_bf16).
  EXPECT_GE(std::stod(accuracy[1]), 25) << result.output;

  // A convolution inside a block is a submodule but not routed: the hint offers what is.
  const fs::path example = dir.path() / "residual_cnn";
  const CommandResult unrouted = testing::run_shell(
      "\"$HOME/.local/mixt/bin/mixt\" check recipe.yaml 'precision.fp32_modules=[blocks.0.conv1]'", example, home);
  EXPECT_EQ(unrouted.exit_code, 2) << unrouted.output;
  EXPECT_THAT(unrouted.output, HasSubstr("the submodules it routes: blocks.0, blocks.1, blocks.2, head"))
      << unrouted.output;

  fs::path run;
  for (const auto& entry : fs::directory_iterator(example / "runs/residual_cnn")) run = entry.path();
  ASSERT_FALSE(run.empty());
  SCOPED_TRACE("exported");
  expect_exports_match_the_eager_forward(run, example, home, dir.path() / ".local/mixt/bin/mixt");
}

}  // namespace
}  // namespace mixt
