// What the export tests share: mixt's eager forward on random batches (`mixt predict --input`),
// gathered for tests/support/export_reference.py, and that script run on a manifest.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mixt/helpers/safetensors.h"
#include "test_support.h"

namespace mixt::testing {

// For each batch N: a seeded random input of N samples of `sample`'s shape, saved as
// inN.safetensors in `dir`, and `MIXT predict TARGET --input` on it at one thread (as the
// reference runs, so that TorchScript computes the same sums bit for bit). Appends input_bN and
// expected_bN to `data`.
inline void predicted_batches(const fs::path& dir, const std::string& target, const std::vector<std::int64_t>& sample,
                              const std::vector<std::int64_t>& batches, std::uint64_t seed, NamedTensors& data,
                              const std::string& mixt = testing::configured::mixt_executable()) {
  at::manual_seed(seed);
  for (std::int64_t batch : batches) {
    std::vector<std::int64_t> shape{batch};
    shape.insert(shape.end(), sample.begin(), sample.end());
    const at::Tensor x = at::randn(shape);
    const std::string b = std::to_string(batch);
    save_safetensors(dir / ("in" + b + ".safetensors"), {{"input", x}});
    const CommandResult predicted =
        run_command("cd " + shell_quote(dir.string()) + " && OMP_NUM_THREADS=1 " + shell_quote(mixt) + " predict " +
                    shell_quote(target) + " --input in" + b + ".safetensors --output out" + b + ".safetensors");
    ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
    data.emplace_back("input_b" + b, x);
    data.emplace_back("expected_b" + b, load_safetensors(dir / ("out" + b + ".safetensors")).tensors.at(0).second);
  }
}

// tests/support/export_reference.py on MANIFEST (a JSON list of cases); its results by case name.
inline nlohmann::json run_export_reference(const fs::path& manifest) {
  const fs::path results = manifest.parent_path() / "results.json";
  const CommandResult result = run_command(shell_quote(MIXT_PYTHON) + " " +
                                           shell_quote((source_dir() / "tests/support/export_reference.py").string()) +
                                           " " + shell_quote(manifest.string()) + " " + shell_quote(results.string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return nlohmann::json::parse(read_file(results));
}

// What every ONNX case of the reference's results must show: no error, onnx.checker's full
// check passed, ONNX Runtime within `tolerance` of the expected outputs.
inline void expect_onnx_within(const nlohmann::json& results, const std::string& name, double tolerance) {
  const nlohmann::json& r = results.at(name);
  ASSERT_FALSE(r.contains("error")) << name << ": " << r["error"];
  EXPECT_EQ(r["checker"], "ok") << name;
  ASSERT_TRUE(r["onnx_max_diff"].is_number()) << name << ": " << r["onnx_max_diff"];
  EXPECT_LE(r["onnx_max_diff"].get<double>(), tolerance) << name;
}

}  // namespace mixt::testing
