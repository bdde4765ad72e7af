// The gpt2 models against Hugging Face transformers' GPT2LMHeadModel:
//  - a transformers-written safetensors file (save_pretrained, the tied lm_head.weight left
//    out) loads strictly and gives transformers' logits, <= 1e-5 relative, float32 on the CPU;
//  - mixt's weights, written as `mixt export` writes them, load into GPT2LMHeadModel (every
//    name, no conversion) and give mixt's logits, checked by the same script;
//  - gpt2 .. gpt2_xl have transformers' names, shapes and parameter counts;
//  - the head is tied (one tensor, one parameter), Conv1D layers reach the linear-map seam
//    with nn.Linear's layout, and the blocks are routed for fp32_modules and checkpointing.
// References: tests/golden/make_gpt2_golden.py, run by the ctest fixture gpt2_golden into
// testing::configured::gpt2_golden_dir().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "mixt/autocast.h"
#include "mixt/cached_decoding.h"
#include "mixt/helpers/activation_checkpointing.h"
#include "mixt/helpers/fp32_modules.h"
#include "mixt/helpers/linear.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

const fs::path kGolden = testing::configured::gpt2_golden_dir();
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

// A model section from YAML (JSON is YAML), built as a recipe would build it.
std::shared_ptr<Model> build(const std::string& yaml, ModelContext context = {}) {
  const Config section(parse_yaml(yaml, "test"), "model");
  return plugins().registry.make_model(section, context);
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

std::int64_t parameter_count(const torch::nn::Module& model) {
  std::int64_t count = 0;
  for (const auto& p : model.parameters()) count += p.numel();
  return count;
}

const std::vector<std::string> kCases = {"tiny", "odd"};

// --- transformers' file into mixt -----------------------------------------------------

class Gpt2FromTransformers : public ::testing::TestWithParam<std::string> {};

TEST_P(Gpt2FromTransformers, LoadsStrictlyAndGivesTransformersLogits) {
  const std::string name = GetParam();
  const auto model = build(read_json(kGolden / "cases.json").at(name).dump());
  const LoadReport report =
      load_state_dict(*model, load_safetensors(kGolden / name / "model.safetensors").tensors, /*strict=*/true, name);
  EXPECT_EQ(report.loaded, state_dict(*model).size());
  const NamedTensors io = load_safetensors(kGolden / (name + ".io.safetensors")).tensors;
  const at::Tensor& ids = find(io, "ids");
  const at::Tensor& expected = find(io, "logits");

  model->eval();
  at::NoGradGuard no_grad;
  const at::Tensor logits = model->forward(ids);
  EXPECT_EQ(logits.sizes(), expected.sizes());
  EXPECT_LE(relative_error(logits, expected), kTolerance);
  // int32 ids, and one sequence alone (causal attention: a prefix sees nothing after it).
  EXPECT_LE(relative_error(model->forward(ids.to(at::kInt)), expected), kTolerance);
  const std::int64_t prefix = ids.size(1) / 2;
  EXPECT_LE(relative_error(model->forward(ids.narrow(0, 1, 1).narrow(1, 0, prefix)),
                           expected.narrow(0, 1, 1).narrow(1, 0, prefix)),
            kTolerance);
}

// --- mixt's weights into transformers ---------------------------------------------------

TEST_P(Gpt2FromTransformers, MixtWeightsLoadIntoGpt2LMHeadModelWithTheSameLogits) {
  const std::string name = GetParam();
  const nlohmann::json section = read_json(kGolden / "cases.json").at(name);
  at::manual_seed(3);
  const auto model = build(section.dump());
  {
    // mixt's own init, its constant LayerNorms and zero biases perturbed (a transposed or
    // swapped tensor must show).
    at::NoGradGuard no_grad;
    for (auto& p : model->parameters()) {
      if (at::equal(p, at::full_like(p, p.flatten()[0].item<float>()))) p.add_(0.1 * at::randn_like(p));
    }
  }
  TempDir dir;
  // What `mixt export --format safetensors` writes: the state_dict, contiguous, on the CPU.
  NamedTensors weights = state_dict(*model);
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

  const CommandResult check =
      testing::run_command(std::string(MIXT_PYTHON) + " " +
                           testing::shell_quote((testing::source_dir() / "tests/golden/make_gpt2_golden.py").string()) +
                           " check " + testing::shell_quote(section_file.string()) + " " +
                           testing::shell_quote((dir.path() / "model.safetensors").string()) + " " +
                           testing::shell_quote((dir.path() / "io.safetensors").string()));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("agree"));
}

INSTANTIATE_TEST_SUITE_P(Cases, Gpt2FromTransformers, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param; });

// --- sizes ------------------------------------------------------------------------------

std::vector<std::pair<std::string, std::vector<std::int64_t>>> names_and_shapes(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const auto& [name, t] : state_dict(model)) out.emplace_back(name, t.sizes().vec());
  return out;
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> golden_state(const nlohmann::json& entries) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const auto& entry : entries)
    out.emplace_back(entry[0].get<std::string>(), entry[1].get<std::vector<std::int64_t>>());
  return out;
}

// gpt2 in full: every name and shape in transformers' order, and the parameter count.
TEST(Gpt2Sizes, Gpt2HasTransformersNamesShapesAndCount) {
  const nlohmann::json sizes = read_json(kGolden / "sizes.json");
  const auto model = build("{name: gpt2}");
  EXPECT_EQ(names_and_shapes(*model), golden_state(sizes.at("gpt2").at("state")));
  EXPECT_EQ(parameter_count(*model), sizes.at("gpt2").at("num_params").get<std::int64_t>());
  EXPECT_EQ(parameter_count(*model), 124'439'808);
}

// The larger sizes (up to 6 GB in float32) are built with one block: the embeddings, the
// first block and the final norm have transformers' names and shapes, and the count with the
// other blocks added is transformers'.
TEST(Gpt2Sizes, LargerSizesHaveTransformersShapesAndCounts) {
  const nlohmann::json sizes = read_json(kGolden / "sizes.json");
  for (const char* name : {"gpt2_medium", "gpt2_large", "gpt2_xl"}) {
    SCOPED_TRACE(name);
    const nlohmann::json& golden = sizes.at(name);
    const auto model = build(std::string("{name: ") + name + ", num_layers: 1}");
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected;
    for (const auto& entry : golden_state(golden.at("state"))) {
      if (entry.first.rfind("transformer.h.", 0) != 0 || entry.first.rfind("transformer.h.0.", 0) == 0) {
        expected.push_back(entry);
      }
    }
    EXPECT_EQ(names_and_shapes(*model), expected);
    std::int64_t block = 0;
    for (const auto& [key, t] : state_dict(*model)) {
      if (key.rfind("transformer.h.0.", 0) == 0) block += t.numel();
    }
    const std::int64_t layers = golden.at("num_layers").get<std::int64_t>();
    EXPECT_EQ(parameter_count(*model) + (layers - 1) * block, golden.at("num_params").get<std::int64_t>());
    // The model's own default is transformers' layer count (`mixt describe` shows it).
    const ComponentEntry* entry = plugins().registry.find(ComponentKind::model, name);
    ASSERT_NE(entry, nullptr);
    std::string default_layers;
    for (const OptionDoc& doc : entry->info.options) {
      if (doc.name == "num_layers") default_layers = doc.default_value;
    }
    EXPECT_EQ(default_layers, std::to_string(layers));
    EXPECT_THAT(entry->info.summary, HasSubstr(std::to_string(layers) + " layers"));
  }
}

// --- the tied head and the linear-map seam -----------------------------------------------

TEST(Gpt2, HeadIsTiedToTheTokenEmbeddingAsOneParameter) {
  at::manual_seed(0);
  const auto model =
      build("{name: gpt2, vocab_size: 50, context_length: 8, num_layers: 2, num_heads: 2, hidden_dim: 32}");
  const NamedTensors state = state_dict(*model);
  EXPECT_EQ(model->parameters().size(), state.size());  // nothing listed twice
  for (const auto& [name, t] : state) EXPECT_EQ(name.rfind("lm_head", 0), std::string::npos) << name;

  const std::vector<LinearLayer> layers = linear_layers(*model);
  ASSERT_FALSE(layers.empty());
  const LinearLayer& head = layers.back();
  EXPECT_EQ(head.name, "lm_head");
  EXPECT_TRUE(head.weight.is_same(find(state, "transformer.wte.weight")));
  // Conv1D's [in, out] parameter reaches a policy as nn.Linear's [out, in].
  EXPECT_EQ(layers.front().name, "transformer.h.0.attn.c_attn");
  EXPECT_EQ(layers.front().in_features(), 32);
  EXPECT_EQ(layers.front().out_features(), 96);
  EXPECT_EQ(layers.size(), 2u * 4u + 1u);

  // The head's gradient and the embedding's land in the one tensor.
  const at::Tensor ids = at::randint(0, 50, {2, 8}, at::kLong);
  model->forward(ids).sum().backward();
  const at::Tensor& wte = find(state, "transformer.wte.weight");
  ASSERT_TRUE(wte.grad().defined());
  // Rows of tokens that never occur get gradient from the head alone: not zero.
  at::Tensor unused = at::ones({50}, at::kBool);
  unused.index_put_({ids.flatten()}, false);
  ASSERT_TRUE(unused.any().item<bool>());
  EXPECT_GT(wte.grad().index({unused}).abs().sum().item<double>(), 0.0);
}

// A LinearFunction installed on a Conv1D layer computes that layer: it gets nn.Linear's
// layout, and what it returns is what the model uses.
TEST(Gpt2, Conv1DLayersComputeThroughAnInstalledLinearFunction) {
  class Recording : public LinearFunction {
   public:
    at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
      shapes.push_back(weight.sizes().vec());
      return at::linear(input, weight, bias);
    }
    std::vector<std::vector<std::int64_t>> shapes;
  };
  const auto model =
      build("{name: gpt2, vocab_size: 50, context_length: 8, num_layers: 1, num_heads: 2, hidden_dim: 32}");
  model->eval();
  const at::Tensor ids = at::randint(0, 50, {1, 5}, at::kLong);
  at::NoGradGuard no_grad;
  const at::Tensor plain = model->forward(ids);
  auto recording = std::make_shared<Recording>();
  for (const LinearLayer& layer : linear_layers(*model)) layer.set_function(recording);
  EXPECT_TRUE(at::allclose(model->forward(ids), plain, 1e-6, 1e-6));
  EXPECT_EQ(recording->shapes,
            (std::vector<std::vector<std::int64_t>>{{96, 32}, {32, 32}, {128, 32}, {32, 128}, {50, 32}}));
}

// --- routing ----------------------------------------------------------------------------

TEST(Gpt2, RoutesItsBlocksForFp32ModulesAndActivationCheckpointing) {
  const std::string yaml =
      "{name: gpt2, vocab_size: 50, context_length: 8, num_layers: 2, num_heads: 2, hidden_dim: 32, dropout: 0, "
      "attention_dropout: 0}";
  at::manual_seed(0);
  const auto model = build(yaml);
  const at::Tensor ids = at::randint(0, 50, {2, 8}, at::kLong);
  {
    model->eval();
    at::NoGradGuard no_grad;
    {
      AutocastScope bf16(at::kCPU, at::kBFloat16);
      EXPECT_EQ(model->forward(ids).scalar_type(), at::kBFloat16);
    }
    const std::vector<std::string> routed = {"transformer", "transformer.h.0", "transformer.h.1", "transformer.ln_f",
                                             "lm_head"};
    set_fp32_modules(*model, routed);
    {
      AutocastScope bf16(at::kCPU, at::kBFloat16);
      EXPECT_EQ(model->forward(ids).scalar_type(), at::kFloat);
    }
    EXPECT_EQ(unrouted_fp32_modules(*model), std::vector<std::string>{});
    set_fp32_modules(*model, {});
  }

  // Recomputing every block gives the same gradients.
  model->train();
  model->zero_grad();
  model->forward(ids).square().mean().backward();
  std::vector<at::Tensor> plain;
  for (const auto& p : model->parameters()) plain.push_back(p.grad().clone());
  model->zero_grad();
  set_activation_checkpointing(*model, {true, {}});
  model->forward(ids).square().mean().backward();
  EXPECT_EQ(checkpointed_submodules(*model), (std::vector<std::string>{"transformer.h.0", "transformer.h.1"}));
  const auto parameters = model->parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    EXPECT_TRUE(at::allclose(parameters[i].grad(), plain[i], 1e-6, 1e-7)) << i;
  }
}

// --- generation ---------------------------------------------------------------------------

// Decoding with the KV cache (a prompt of 5, then one token at a time, then 3 at once) gives
// the logits forward() gives for the whole sequence, position by position; clear_cache starts over.
TEST(Gpt2, DecodingWithTheCacheGivesTheLogitsOfTheWholeSequence) {
  const auto model =
      build("{name: gpt2, vocab_size: 50, context_length: 16, num_layers: 2, num_heads: 2, hidden_dim: 32}");
  model->eval();
  at::NoGradGuard no_grad;
  auto* cached = dynamic_cast<CachedDecoding*>(model.get());
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cached->context_length(), 16);
  at::manual_seed(3);
  const at::Tensor ids = at::randint(0, 50, {2, 12}, at::kLong);
  const at::Tensor whole = model->forward(ids);
  for (int pass = 0; pass < 2; ++pass) {
    cached->clear_cache();
    std::vector<at::Tensor> pieces = {cached->decode(ids.slice(1, 0, 5))};
    for (std::int64_t t = 5; t < 9; ++t) pieces.push_back(cached->decode(ids.slice(1, t, t + 1)));
    pieces.push_back(cached->decode(ids.slice(1, 9, 12)));  // several new positions after a past
    EXPECT_LT(relative_error(at::cat(pieces, 1), whole), kTolerance) << "pass " << pass;
  }
  EXPECT_THROW(cached->decode(ids.slice(1, 0, 5)), c10::Error);  // 12 + 5 > context 16
}

// Records the names a model routes (call_submodule / call_block), in order.
class RoutedNames : public SubmoduleObserver {
 public:
  void observe(std::string_view name, const at::Tensor&) override { names.emplace_back(name); }
  std::vector<std::string> names;
};

// The cached decode routes what forward() routes, so precision.fp32_modules (and mixt
// diagnose) see generation as they see training: the same names, and under bfloat16 autocast
// a head listed in fp32_modules gives float32 logits from either.
TEST(Gpt2, DecodingRoutesTheSubmodulesForwardRoutes) {
  const auto model =
      build("{name: gpt2, vocab_size: 50, context_length: 16, num_layers: 2, num_heads: 2, hidden_dim: 32}");
  model->eval();
  at::NoGradGuard no_grad;
  auto* cached = dynamic_cast<CachedDecoding*>(model.get());
  ASSERT_NE(cached, nullptr);
  const at::Tensor ids = at::randint(0, 50, {2, 6}, at::kLong);
  RoutedNames by_forward, by_decode;
  set_submodule_observer(*model, &by_forward);
  model->forward(ids);
  set_submodule_observer(*model, &by_decode);
  cached->clear_cache();
  cached->decode(ids);
  set_submodule_observer(*model, nullptr);
  EXPECT_EQ(by_decode.names, by_forward.names);
  EXPECT_EQ(by_forward.names.size(), 5u);  // transformer.h.0, .h.1, .ln_f, transformer, lm_head

  set_fp32_modules(*model, {"lm_head"});
  AutocastScope bf16(at::kCPU, at::kBFloat16);
  cached->clear_cache();
  EXPECT_EQ(cached->decode(ids).scalar_type(), at::kFloat);
  set_fp32_modules(*model, {});
  cached->clear_cache();
  EXPECT_EQ(cached->decode(ids).scalar_type(), at::kBFloat16);
}

// --- options and inputs --------------------------------------------------------------------

TEST(Gpt2, OptionsAndInputsThatDoNotFitAreErrors) {
  ModelContext images;
  images.sample_shape = {3, 32, 32};
  EXPECT_THAT(testing::thrown_error([&] { build("{name: gpt2, num_layers: 1}", images); }).what(),
              HasSubstr("token sequences"));
  ModelContext long_sequences;
  long_sequences.sample_shape = {2048};
  EXPECT_THAT(testing::thrown_error([&] { build("{name: gpt2, num_layers: 1}", long_sequences); }).what(),
              HasSubstr("context_length is 1024"));
  EXPECT_THAT(testing::thrown_error([&] { build("{name: gpt2, num_heads: 5}"); }).what(),
              HasSubstr("must divide hidden_dim"));

  const auto model =
      build("{name: gpt2, vocab_size: 50, context_length: 8, num_layers: 1, num_heads: 2, hidden_dim: 32}");
  model->eval();
  at::NoGradGuard no_grad;
  EXPECT_THROW(model->forward(at::zeros({2, 9}, at::kLong)), c10::Error);  // longer than the context
  EXPECT_THROW(model->forward(at::zeros({2, 3, 8, 8})), c10::Error);       // an image batch
  EXPECT_EQ(model->forward(at::zeros({2, 8}, at::kLong)).sizes(), (std::vector<std::int64_t>{2, 8, 50}));
}

}  // namespace
}  // namespace mixt
