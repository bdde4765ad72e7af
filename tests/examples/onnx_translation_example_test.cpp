// examples/exportable_model (a forward of ops beyond the zoo's and a custom op of its own,
// exportable::swish, that its plugin translates to ONNX itself) built out of tree from the
// installed copy with the commands of docs/plugins.md ("An ONNX translation of your own"):
// `--list-ops` names each translation's source, the model trains, and its ONNX export
// computes in ONNX Runtime what mixt's eager forward does (`mixt predict --input`) at batches
// 1, 3 and 8, as its TorchScript export does with the plugin loaded for the custom op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "example_environment.h"
#include "export_checks.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

// One test: under ctest each test is a process of its own, and building and training the
// example is most of its time.
TEST(OnnxTranslationExample, BuildsFromTheInstalledCopyAndItsCustomOpExports) {
  TempDir dir;
  const std::string shorter = " trainer.max_steps_per_epoch=30 data.val.limit=500 trainer.threads=2";
  const std::string script = testing::on_shared_install(
      testing::replace_once(testing::documented_commands("docs/plugins.md", "exportable_model"), "run recipe.yaml",
                            "run recipe.yaml" + shorter),
      dir.path());
  const std::string home = testing::example_environment(dir.path());
  const CommandResult result = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(result.exit_code, 0) << script << "\n" << result.output;
  // The custom op through the plugin's translation, the others through the built-in table.
  EXPECT_THAT(result.output, HasSubstr("| `exportable::swish` | 1 | Mul+Sigmoid+Mul | "));
  EXPECT_THAT(result.output, HasSubstr("libmixt_exportable_model.so |"));
  EXPECT_THAT(result.output,
              HasSubstr("| `aten::_convolution` | 3 | Conv, or ConvTranspose (transposed) | built in |"));
  for (const char* op : {"reflection_pad2d", "group_norm", "leaky_relu", "avg_pool2d", "tanh", "upsample_bilinear2d",
                         "exp", "clamp", "sum", "abs", "log", "pow", "sqrt", "amax", "stack", "where"}) {
    EXPECT_THAT(result.output, HasSubstr("| `aten::" + std::string(op) + "` |")) << op;
  }
  EXPECT_THAT(result.output, HasSubstr("0 without a translation"));
  EXPECT_THAT(result.output, HasSubstr("at opset 17: every op translates"));

  const fs::path example = dir.path() / "exportable_model";
  const fs::path run = testing::only_run_directory(example / "runs/exportable_model");
  const std::string mixt = (dir.path() / ".local/mixt/bin/mixt").string();
  TempDir out;
  for (const char* file : {"m.onnx", "m21.onnx", "m.pt"}) {
    const std::string opset = std::string(file) == "m21.onnx" ? " --opset 21" : "";
    const CommandResult exported =
        testing::run_shell(testing::shell_quote(mixt) + " export " + testing::shell_quote(run.string()) + " -o " +
                               testing::shell_quote((out.path() / file).string()) + opset,
                           example, home);
    ASSERT_EQ(exported.exit_code, 0) << file << ":\n" << exported.output;
  }
  const std::vector<std::int64_t> batches{1, 3, 8};
  NamedTensors data;
  ASSERT_NO_FATAL_FAILURE(testing::predicted_batches(out.path(), run.string(), {1, 28, 28}, batches, 5, data, mixt));
  save_safetensors(out.path() / "data.safetensors", data);
  const std::string plugin = (example / "build/libmixt_exportable_model.so").string();
  nlohmann::json manifest = nlohmann::json::array();
  for (const char* file : {"m.onnx", "m21.onnx"}) {
    manifest.push_back({{"name", file},
                        {"data", (out.path() / "data.safetensors").string()},
                        {"batches", batches},
                        {"onnx", (out.path() / file).string()},
                        {"torchscript", (out.path() / "m.pt").string()},
                        {"load_library", plugin}});
  }
  out.write("manifest.json", manifest.dump());
  const nlohmann::json results = testing::run_export_reference(out.path() / "manifest.json");
  for (const char* file : {"m.onnx", "m21.onnx"}) {
    const nlohmann::json& r = results.at(file);
    ASSERT_FALSE(r.contains("error")) << r["error"];
    EXPECT_EQ(r["checker"], "ok") << file;
    EXPECT_GT(r["expected_max_abs"].get<double>(), 0.05);  // real logits, not a comparison of zeros
    ASSERT_TRUE(r["onnx_max_diff"].is_number()) << r["onnx_max_diff"];
    EXPECT_LE(r["onnx_max_diff"].get<double>(), 1e-5 * std::max(1.0, r["expected_max_abs"].get<double>())) << file;
    ASSERT_TRUE(r["torchscript_max_diff"].is_number()) << r["torchscript_max_diff"];
    EXPECT_EQ(r["torchscript_max_diff"].get<double>(), 0.0);
    EXPECT_EQ(r["inputs"][0][0], "batch");
    std::cout << "[ measured ] exportable_model (" << file << "): logits up to " << r["expected_max_abs"]
              << "; ONNX Runtime " << r["onnx_max_diff"] << ", torch.jit.load " << r["torchscript_max_diff"] << "\n";
  }
}

}  // namespace
}  // namespace mixt
