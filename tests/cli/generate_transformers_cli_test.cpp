// `mixt generate` on a transformers folder (model.from) against transformers' generate on it:
//  - greedy and sampled generation (temperature, top_k, top_p, repetition penalty from the
//    folder's generation_config.json) stop at its eos token where transformers stops, and the
//    streamed text is tokenizers' decode of prompt and new tokens byte for byte, U+FFFD where
//    the draws leave a character unfinished;
//  - the command line's values take precedence (--ignore-eos, --temperature 0);
//  - the first line on stderr names the policy, its autocast and the stop token, and
//    --precision runs under another policy than the recipe's.
// No task or tokenizer is named: model.from implies both.
// References: tests/golden/make_generation_golden.py, run by the ctest fixture generation_golden.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace mixt::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const fs::path kGolden = fs::path(configured::binary_dir()) / "tests" / "generation_golden";

const nlohmann::json& cases() {
  static const nlohmann::json parsed = nlohmann::json::parse(read_file(kGolden / "cases.json"));
  return parsed;
}

struct Generated {
  int exit_code;
  std::string text;    // stdout
  std::string report;  // stderr
};

// `mixt generate` on a recipe holding only `model: {name: llama, from: FOLDER}` (and `extra`).
Generated generate(const std::string& folder, std::vector<std::string> args, const std::string& extra = "") {
  TempDir dir;
  const fs::path recipe =
      dir.write("recipe.yaml", "model: {name: llama, from: '" + (kGolden / folder).string() + "'}\n" + extra);
  std::string command = "(cd " + shell_quote(dir.path().string()) + " && " + shell_quote(configured::mixt_executable()) +
                        " generate " + shell_quote(recipe.string());
  for (const auto& arg : args) command += " " + shell_quote(arg);
  // In a subshell: run_command adds its own 2>&1 after the command.
  const CommandResult result = run_command(command + " 2>" + shell_quote((dir.path() / "stderr").string()) + ")");
  return {result.exit_code, result.output, read_file(dir.path() / "stderr")};
}

std::vector<std::string> prompt_args(const nlohmann::json& c) {
  return {"--prompt", c["prompt"].get<std::string>(), "--max-new-tokens", std::to_string(c["max_new_tokens"].get<int>()),
          "--seed", std::to_string(c["seed"].get<int>())};
}

TEST(GenerateFromTransformersFolder, GreedyStopsAtTheEosTokenWhereTransformersStops) {
  const auto& c = cases()["greedy"];
  const Generated got = generate("greedy", prompt_args(c));
  ASSERT_EQ(got.exit_code, 0) << got.report;
  EXPECT_EQ(got.text, c["decoded"].get<std::string>() + "\n");
  EXPECT_LT(c["tokens"].size(), c["max_new_tokens"].get<std::size_t>());  // it stopped early
}

TEST(GenerateFromTransformersFolder, SamplingAsGenerationConfigSaysStopsAndStreamsTransformersDecode) {
  const auto& c = cases()["sampled"];
  const Generated got = generate("sampled", prompt_args(c));
  ASSERT_EQ(got.exit_code, 0) << got.report;
  EXPECT_EQ(got.text, c["decoded"].get<std::string>() + "\n");
  EXPECT_THAT(got.text, HasSubstr("\xEF\xBF\xBD"));  // a character left unfinished, as U+FFFD
  EXPECT_THAT(got.report, HasSubstr("sampling at temperature 0.9"));
  EXPECT_THAT(got.report, HasSubstr("top_k 40"));
  EXPECT_THAT(got.report, HasSubstr("repetition_penalty 1.3"));
  EXPECT_THAT(got.report, HasSubstr("stops at token " + std::to_string(c["eos"].get<int>())));
  EXPECT_THAT(got.report, HasSubstr("generation_config.json"));
}

TEST(GenerateFromTransformersFolder, TheCommandLineTakesPrecedence) {
  const auto& sampled = cases()["sampled"];
  const Generated unstopped = generate("sampled", [&] {
    auto args = prompt_args(sampled);
    args.push_back("--ignore-eos");
    return args;
  }());
  ASSERT_EQ(unstopped.exit_code, 0) << unstopped.report;
  EXPECT_EQ(unstopped.text, sampled["decoded_unstopped"].get<std::string>() + "\n");
  // The likeliest token without a penalty: transformers' greedy draws on the same weights.
  const auto& greedy = cases()["greedy"];
  auto args = prompt_args(greedy);
  for (const char* arg : {"--temperature", "0", "--repetition-penalty", "1", "--ignore-eos"}) args.push_back(arg);
  const Generated likeliest = generate("sampled", args);
  ASSERT_EQ(likeliest.exit_code, 0) << likeliest.report;
  EXPECT_EQ(likeliest.text, greedy["decoded_unstopped"].get<std::string>() + "\n");
  EXPECT_THAT(likeliest.report, HasSubstr("the likeliest token"));
  EXPECT_THAT(likeliest.report, HasSubstr("no stop token"));
}

TEST(GenerateFromTransformersFolder, SaysThePrecisionItRunsUnderAndTakesAnother) {
  const auto& c = cases()["greedy"];
  const Generated bf16 = generate("greedy", prompt_args(c), "precision: {name: amp_bf16}\n");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.report;
  EXPECT_THAT(bf16.report, HasSubstr("precision amp_bf16 (autocast to BFloat16"));
  auto args = prompt_args(c);
  args.insert(args.end(), {"--precision", "fp32"});
  const Generated fp32 = generate("greedy", args, "precision: {name: amp_bf16}\n");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.report;
  EXPECT_THAT(fp32.report, HasSubstr("precision fp32 (no autocast"));
  EXPECT_EQ(fp32.text, c["decoded"].get<std::string>() + "\n");
  args.back() = "fp33";
  const Generated unknown = generate("greedy", args);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.report, HasSubstr("fp32"));  // the closest name
  EXPECT_THAT(unknown.report, Not(HasSubstr("terminate")));
}

// A generation_config.json whose values are of the wrong type: exit 2 naming the key.
TEST(GenerateFromTransformersFolder, ABadGenerationConfigIsARecipeErrorNamingTheKey) {
  TempDir dir;
  fs::copy(kGolden / "greedy", dir.path() / "folder");
  nlohmann::json config = nlohmann::json::parse(read_file(dir.path() / "folder" / "generation_config.json"));
  config["top_p"] = "most";
  dir.write("folder/generation_config.json", config.dump());
  dir.write("recipe.yaml", "model: {name: llama, from: '" + (dir.path() / "folder").string() + "'}\n");
  const CommandResult result = run_mixt({"generate", (dir.path() / "recipe.yaml").string(), "--prompt", "a"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("top_p"));
  // A number beyond a double's range: nlohmann's out_of_range, not its parse_error (fuzzing
  // found it in the other JSON readers).
  dir.write("folder/generation_config.json", "{\"top_p\": 1e400}");
  const CommandResult huge = run_mixt({"generate", (dir.path() / "recipe.yaml").string(), "--prompt", "a"});
  EXPECT_EQ(huge.exit_code, 2) << huge.output;
  EXPECT_THAT(huge.output, HasSubstr("generation_config.json is not valid JSON"));
  EXPECT_THAT(huge.output, Not(HasSubstr("terminate")));
}

}  // namespace
}  // namespace mixt::testing
