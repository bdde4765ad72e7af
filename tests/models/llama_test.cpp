// The llama models against Hugging Face transformers' LlamaForCausalLM:
//  - transformers-written safetensors load strictly and give transformers' logits, <= 1e-5
//    relative, float32 on the CPU, at several lengths (1, a few, the whole context), for a
//    grouped-query case with a tied head and a llama3-rope case with an untied head, a
//    head_dim of its own and biases; the same through `model.from` on the save_pretrained
//    directory, its config.json in transformers 5's layout and in transformers 4's;
//  - mixt's weights load into LlamaForCausalLM.from_pretrained (config.json written from
//    mixt's section) and give mixt's logits, checked by the same script;
//  - greedy generation is token-equal to transformers' generate, with the KV cache and
//    without;
//  - the presets have transformers' names, shapes and parameter counts;
//  - the layers are routed (fp32_modules, activation checkpointing) and reach the
//    linear-map seam, and the head is offered for the fused loss.
// References: tests/golden/make_llama_golden.py, run by the ctest fixture llama_golden.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "assembly/components.h"
#include "expect_error.h"
#include "mixt/autocast.h"
#include "mixt/cached_decoding.h"
#include "mixt/helpers/activation_checkpointing.h"
#include "mixt/helpers/fp32_modules.h"
#include "mixt/helpers/linear.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "mixt/linear_head.h"
#include "mixt/packed_sequences.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;

const fs::path kGolden = testing::configured::llama_golden_dir();
constexpr double kTolerance = 1e-5;

const testing::BuiltPlugins& plugins() {
  static const testing::BuiltPlugins built;
  return built;
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in) << file;
  return nlohmann::json::parse(in);
}

std::shared_ptr<Model> build(const std::string& yaml, ModelContext context = {}) {
  const Config section(parse_yaml(yaml, "test"), "model");
  return build_model(section, plugins().registry, context);
}

double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  return (got - expected).abs().max().item<double>() / std::max(expected.abs().max().item<double>(), 1e-12);
}

const at::Tensor& find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& item : tensors) {
    if (item.first == name) return item.second;
  }
  throw std::runtime_error("no tensor " + name);
}

bool has(const NamedTensors& tensors, const std::string& name) {
  for (const auto& item : tensors) {
    if (item.first == name) return true;
  }
  return false;
}

std::int64_t parameter_count(const torch::nn::Module& model) {
  std::int64_t count = 0;
  for (const auto& p : model.parameters()) count += p.numel();
  return count;
}

// Every ids_N of the case's io file through `model`, against logits_N.
void expect_transformers_logits(Model& model, const NamedTensors& io) {
  model.eval();
  at::NoGradGuard no_grad;
  for (int n = 0; has(io, "ids_" + std::to_string(n)); ++n) {
    const at::Tensor& ids = find(io, "ids_" + std::to_string(n));
    const at::Tensor& expected = find(io, "logits_" + std::to_string(n));
    const at::Tensor logits = model.forward(ids);
    ASSERT_EQ(logits.sizes(), expected.sizes()) << n;
    EXPECT_LE(relative_error(logits, expected), kTolerance) << "ids_" << n << " " << ids.sizes();
  }
}

const std::vector<std::string> kCases = {"gqa_tied", "llama3_untied"};

class LlamaFromTransformers : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaFromTransformers, LoadsStrictlyAndGivesTransformersLogitsAtEveryLength) {
  const std::string name = GetParam();
  const auto model = build(read_json(kGolden / "cases.json").at(name).dump());
  const LoadReport report =
      load_state_dict(*model, load_safetensors(kGolden / name / "model.safetensors").tensors, /*strict=*/true, name);
  EXPECT_EQ(report.loaded, state_dict(*model).size());
  const NamedTensors io = load_safetensors(kGolden / (name + ".io.safetensors")).tensors;
  expect_transformers_logits(*model, io);
  // int32 ids give the same.
  at::NoGradGuard no_grad;
  EXPECT_LE(relative_error(model->forward(find(io, "ids_0").to(at::kInt)), find(io, "logits_0")), kTolerance);
}

// model.from on the save_pretrained folder: config.json sizes the model (nothing else is
// given), whether transformers 5 wrote it (rope_parameters) or 4 (rope_theta, rope_scaling).
TEST_P(LlamaFromTransformers, ModelFromTheDirectoryInEitherConfigLayout) {
  const std::string name = GetParam();
  const NamedTensors io = load_safetensors(kGolden / (name + ".io.safetensors")).tensors;
  for (const std::string& folder : std::vector<std::string>{name, name + "_v4"}) {
    SCOPED_TRACE(folder);
    const auto model = build("{name: llama, from: " + (kGolden / folder).string() + "}");
    expect_transformers_logits(*model, io);
  }
}

TEST_P(LlamaFromTransformers, MixtWeightsLoadIntoFromPretrainedWithTheSameLogits) {
  const std::string name = GetParam();
  const nlohmann::json section = read_json(kGolden / "cases.json").at(name);
  at::manual_seed(3);
  const auto model = build(section.dump());
  {
    at::NoGradGuard no_grad;
    for (auto& p : model->parameters()) {
      if (at::equal(p, at::full_like(p, p.flatten()[0].item<float>()))) p.add_(0.1 * at::randn_like(p));
    }
  }
  TempDir dir;
  NamedTensors weights = state_dict(*model);
  EXPECT_EQ(has(weights, "lm_head.weight"), !section.at("tie_embeddings").get<bool>());
  for (auto& item : weights) item.second = item.second.to(at::kCPU).contiguous();
  save_safetensors(dir.path() / "model.safetensors", weights);
  const at::Tensor ids = at::randint(0, section.at("vocab_size").get<std::int64_t>(), {2, 9}, at::kLong);
  model->eval();
  at::Tensor logits;
  {
    at::NoGradGuard no_grad;
    logits = model->forward(ids);
  }
  save_safetensors(dir.path() / "io.safetensors", {{"ids", ids}, {"logits", logits}});
  const fs::path section_file = dir.write("section.json", section.dump());
  const CommandResult check = testing::run_command(
      std::string(MIXT_PYTHON) + " " +
      testing::shell_quote((testing::source_dir() / "tests/golden/make_llama_golden.py").string()) + " check " +
      testing::shell_quote(section_file.string()) + " " +
      testing::shell_quote((dir.path() / "model.safetensors").string()) + " " +
      testing::shell_quote((dir.path() / "io.safetensors").string()));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("agree"));
}

// Greedy decoding, argmax of the last position each time: with the KV cache (the prompt,
// then a token at a time) and without it (the whole sequence each time), the tokens
// transformers' generate(do_sample=False) gave with its cache and without.
TEST_P(LlamaFromTransformers, GreedyGenerationIsTransformersTokensWithAndWithoutTheCache) {
  const std::string name = GetParam();
  const auto model = build("{name: llama, from: " + (kGolden / name).string() + "}");
  model->eval();
  at::NoGradGuard no_grad;
  const NamedTensors io = load_safetensors(kGolden / (name + ".io.safetensors")).tensors;
  const at::Tensor& prompt = find(io, "prompt");
  const std::int64_t new_tokens = find(io, "greedy_cache").size(1);

  auto* cached = dynamic_cast<CachedDecoding*>(model.get());
  ASSERT_NE(cached, nullptr);
  cached->clear_cache();
  std::vector<at::Tensor> with_cache;
  at::Tensor logits = cached->decode(prompt);
  for (std::int64_t i = 0; i < new_tokens; ++i) {
    with_cache.push_back(logits.select(1, -1).argmax(-1, /*keepdim=*/true));
    logits = cached->decode(with_cache.back());
  }
  at::Tensor sequence = prompt;
  for (std::int64_t i = 0; i < new_tokens; ++i) {
    sequence = at::cat({sequence, model->forward(sequence).select(1, -1).argmax(-1, true)}, 1);
  }
  EXPECT_TRUE(at::equal(at::cat(with_cache, 1), find(io, "greedy_cache")));
  EXPECT_TRUE(at::equal(sequence.slice(1, prompt.size(1)), find(io, "greedy_nocache")));
}

INSTANTIATE_TEST_SUITE_P(Cases, LlamaFromTransformers, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param; });

// --- presets ------------------------------------------------------------------------------

std::vector<std::pair<std::string, std::vector<std::int64_t>>> names_and_shapes(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const auto& [name, t] : state_dict(model)) out.emplace_back(name, t.sizes().vec());
  return out;
}

// Built with one layer (Llama-3.2-1B is 5 GB in float32): the embedding, the first layer,
// the norm and the head have transformers' names and shapes, and the count with the other
// layers added is transformers'.
TEST(LlamaPresets, HaveTransformersNamesShapesAndCounts) {
  const nlohmann::json sizes = read_json(kGolden / "sizes.json");
  for (const char* name : {"smollm2_135m", "tinyllama_1_1b", "llama3_2_1b"}) {
    SCOPED_TRACE(name);
    const nlohmann::json& golden = sizes.at(name);
    const auto model = build(std::string("{name: ") + name + ", num_layers: 1}");
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected;
    for (const auto& entry : golden.at("state")) {
      const std::string key = entry[0].get<std::string>();
      if (key.rfind("model.layers.", 0) != 0 || key.rfind("model.layers.0.", 0) == 0) {
        expected.emplace_back(key, entry[1].get<std::vector<std::int64_t>>());
      }
    }
    EXPECT_EQ(names_and_shapes(*model), expected);
    std::int64_t layer = 0;
    for (const auto& [key, t] : state_dict(*model)) {
      if (key.rfind("model.layers.0.", 0) == 0) layer += t.numel();
    }
    const std::int64_t layers = golden.at("num_layers").get<std::int64_t>();
    EXPECT_EQ(parameter_count(*model) + (layers - 1) * layer, golden.at("num_params").get<std::int64_t>());
    const ComponentEntry* entry = plugins().registry.find(ComponentKind::model, name);
    ASSERT_NE(entry, nullptr);
    EXPECT_THAT(entry->info.summary, HasSubstr(std::to_string(layers) + " layers"));
  }
}

// --- routing, the seam, the head ---------------------------------------------------------------

const char* const kSmall =
    "{name: llama, vocab_size: 50, context_length: 16, num_layers: 2, num_heads: 4, num_kv_heads: 2, hidden_dim: 32, "
    "mlp_dim: 48, tie_embeddings: true}";

TEST(Llama, TiedHeadIsOneParameterAndEveryLinearReachesTheSeam) {
  const auto model = build(kSmall);
  const NamedTensors state = state_dict(*model);
  EXPECT_EQ(model->parameters().size(), state.size());
  EXPECT_FALSE(has(state, "lm_head.weight"));
  const std::vector<LinearLayer> layers = linear_layers(*model);
  ASSERT_EQ(layers.size(), 2u * 7u + 1u);
  EXPECT_EQ(layers.front().name, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(layers[1].out_features(), 16);  // k_proj: 2 kv heads of 8
  EXPECT_EQ(layers.back().name, "lm_head");
  EXPECT_TRUE(layers.back().weight.is_same(find(state, "model.embed_tokens.weight")));
  auto* head = dynamic_cast<LinearHead*>(model.get());
  ASSERT_NE(head, nullptr);
  EXPECT_TRUE(head->head().weight.is_same(find(state, "model.embed_tokens.weight")));
  EXPECT_EQ(head->head().name, "lm_head");
  model->eval();
  at::NoGradGuard no_grad;
  const at::Tensor ids = at::randint(0, 50, {2, 7}, at::kLong);
  EXPECT_TRUE(at::allclose(at::linear(head->features(ids), head->head().weight), model->forward(ids), 1e-6, 1e-6));
}

TEST(Llama, RoutesLayersForFp32ModulesAndCheckpointsThemWithTheSameGradients) {
  at::manual_seed(0);
  const auto model = build(kSmall);
  const at::Tensor ids = at::randint(0, 50, {2, 16}, at::kLong);
  {
    model->eval();
    at::NoGradGuard no_grad;
    set_fp32_modules(*model, {"model", "model.layers.0", "model.layers.1", "model.norm", "lm_head"});
    {
      AutocastScope bf16(at::kCPU, at::kBFloat16);
      EXPECT_EQ(model->forward(ids).scalar_type(), at::kFloat);
    }
    EXPECT_EQ(unrouted_fp32_modules(*model), std::vector<std::string>{});
    set_fp32_modules(*model, {});
    AutocastScope bf16(at::kCPU, at::kBFloat16);
    EXPECT_EQ(model->forward(ids).scalar_type(), at::kBFloat16);
  }
  model->train();
  model->zero_grad();
  model->forward(ids).square().mean().backward();
  std::vector<at::Tensor> plain;
  for (const auto& p : model->parameters()) plain.push_back(p.grad().clone());
  model->zero_grad();
  set_activation_checkpointing(*model, {true, {}});
  model->forward(ids).square().mean().backward();
  EXPECT_EQ(checkpointed_submodules(*model), (std::vector<std::string>{"model.layers.0", "model.layers.1"}));
  const auto parameters = model->parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    EXPECT_TRUE(at::allclose(parameters[i].grad(), plain[i], 1e-6, 1e-7)) << i;
  }
}

// A prompt, single tokens, then several at once after a past (the masked case).
TEST(Llama, DecodingWithTheCacheGivesTheLogitsOfTheWholeSequence) {
  const auto model = build(kSmall);
  model->eval();
  at::NoGradGuard no_grad;
  auto* cached = dynamic_cast<CachedDecoding*>(model.get());
  ASSERT_NE(cached, nullptr);
  const at::Tensor ids = at::randint(0, 50, {2, 12}, at::kLong);
  const at::Tensor whole = model->forward(ids);
  cached->clear_cache();
  std::vector<at::Tensor> pieces = {cached->decode(ids.slice(1, 0, 5))};
  for (std::int64_t t = 5; t < 9; ++t) pieces.push_back(cached->decode(ids.slice(1, t, t + 1)));
  pieces.push_back(cached->decode(ids.slice(1, 9, 12)));
  EXPECT_LT(relative_error(at::cat(pieces, 1), whole), kTolerance);
  EXPECT_THROW(cached->decode(ids.slice(1, 0, 5)), c10::Error);  // 12 + 5 > context 16
}

// Packed rows (mixt/packed_sequences.h): each sequence's logits are those it has alone, its
// positions restarting at 0 and its attention kept inside it; positions 0, 1, ... through a
// row give forward()'s.
TEST(Llama, PackedRowsGiveEachSequenceTheLogitsItHasAlone) {
  const auto model = build(kSmall);
  model->eval();
  at::NoGradGuard no_grad;
  auto* packed = dynamic_cast<PackedModel*>(model.get());
  ASSERT_NE(packed, nullptr);
  const at::Tensor a = at::randint(0, 50, {1, 5}, at::kLong), b = at::randint(0, 50, {1, 7}, at::kLong);
  const at::Tensor row = at::cat({a, b, at::zeros({1, 2}, at::kLong)}, 1);  // two sequences and padding: 14
  const at::Tensor positions = at::cat({at::arange(5), at::arange(7), at::arange(7, 9)}).unsqueeze(0);
  const at::Tensor logits = packed->forward_packed(row, positions);
  EXPECT_LT(relative_error(logits.slice(1, 0, 5), model->forward(a)), kTolerance);
  EXPECT_LT(relative_error(logits.slice(1, 5, 12), model->forward(b)), kTolerance);
  // Without the mask the second sequence would see the first.
  EXPECT_GT(relative_error(model->forward(row).slice(1, 5, 12), model->forward(b)), 1e-3);
  const at::Tensor ids = at::randint(0, 50, {2, 12}, at::kLong);
  EXPECT_LT(relative_error(packed->forward_packed(ids, at::arange(12).expand({2, 12})), model->forward(ids)),
            kTolerance);
}

TEST(Llama, OptionsAndInputsThatDoNotFitAreErrors) {
  EXPECT_THAT(testing::thrown_error([&] { build("{name: llama, num_layers: 1, num_kv_heads: 4}"); }).what(),
              HasSubstr("must divide num_heads"));
  EXPECT_THAT(
      testing::thrown_error([&] { build("{name: llama, num_layers: 1, num_heads: 7, num_kv_heads: 7}"); }).what(),
      HasSubstr("must divide hidden_dim"));
  EXPECT_THAT(testing::thrown_error([&] { build("{name: llama, num_layers: 1, head_dim: 9}"); }).what(),
              HasSubstr("must be even"));
  EXPECT_THAT(testing::thrown_error([&] { build("{name: llama, num_layers: 1, rope_type: yarn}"); }).what(),
              HasSubstr("llama3"));
  ModelContext images;
  images.sample_shape = {3, 32, 32};
  EXPECT_THAT(testing::thrown_error([&] { build("{name: llama, num_layers: 1}", images); }).what(),
              HasSubstr("token sequences"));
  const auto model = build(kSmall);
  model->eval();
  at::NoGradGuard no_grad;
  EXPECT_THROW(model->forward(at::zeros({2, 17}, at::kLong)), c10::Error);
  EXPECT_EQ(model->forward(at::zeros({2, 16}, at::kLong)).sizes(), (std::vector<std::int64_t>{2, 16, 50}));
}

// A transformers directory of another family, or with another activation, is refused by name.
TEST(Llama, ADirectoryItDoesNotImplementIsARecipeError) {
  TempDir dir;
  fs::create_directories(dir.path() / "ckpt");
  nlohmann::json config = read_json(kGolden / "gqa_tied" / "config.json");
  config["hidden_act"] = "gelu";
  dir.write("ckpt/config.json", config.dump());
  fs::copy_file(kGolden / "gqa_tied" / "model.safetensors", dir.path() / "ckpt" / "model.safetensors");
  EXPECT_THAT(
      testing::thrown_error([&] { build("{name: llama, from: " + (dir.path() / "ckpt").string() + "}"); }).what(),
      HasSubstr("hidden_act"));
  config["hidden_act"] = "silu";
  config["rope_parameters"]["rope_type"] = "yarn";
  dir.write("ckpt/config.json", config.dump());
  EXPECT_THAT(
      testing::thrown_error([&] { build("{name: llama, from: " + (dir.path() / "ckpt").string() + "}"); }).what(),
      HasSubstr("yarn"));
}

}  // namespace
}  // namespace mixt
