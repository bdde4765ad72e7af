// Float8 linear layers: the SDK's seam (mixt/helpers/linear.h: mixt::Linear, LinearMaps,
// linear_layers), torchao's tensorwise and rowwise recipes (mixt/helpers/float8.h) and the
// fp8_* policies, bit for bit against torchao 0.18 (goldens made by ctest on this machine:
// tests/golden/make_float8_golden.py; make_float8_rowwise_golden.py, torchao's emulation of
// the rowwise recipe, which is what fp8_rowwise computes on the CPU).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "mixt/helpers/float8.h"
#include "mixt/helpers/linear.h"
#include "mixt/helpers/master_weights.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const nlohmann::json& golden() {
  static const nlohmann::json parsed =
      nlohmann::json::parse(testing::read_file(testing::configured::float8_golden_dir() + "/float8.json"));
  return parsed;
}

const nlohmann::json& rowwise_golden() {
  static const nlohmann::json parsed =
      nlohmann::json::parse(testing::read_file(testing::configured::float8_golden_dir() + "/float8_rowwise.json"));
  return parsed;
}

testing::BuiltPlugins& plugins() {
  static testing::BuiltPlugins built;
  return built;
}

at::Tensor tensor_of(const nlohmann::json& values, at::IntArrayRef shape, at::ScalarType dtype = at::kFloat) {
  return at::tensor(values.get<std::vector<float>>()).reshape(shape).to(dtype);
}

// The generator's mlp(): Linear, ReLU, ..., Linear, as mixt::Linear.
torch::nn::Sequential mlp(const std::vector<std::int64_t>& sizes) {
  torch::nn::Sequential model;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    model->push_back(Linear(sizes[i], sizes[i + 1]));
    if (i + 2 < sizes.size()) model->push_back(torch::nn::ReLU());
  }
  return model;
}

void load_layers(torch::nn::Sequential& model, const nlohmann::json& layers, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  std::size_t i = 0;
  for (const LinearLayer& layer : linear_layers(*model)) {
    layer.weight.set_data(tensor_of(layers[i]["weight"], layer.weight.sizes(), dtype));
    layer.bias.set_data(tensor_of(layers[i]["bias"], layer.bias.sizes(), dtype));
    ++i;
  }
}

std::string first_difference(const at::Tensor& actual, const at::Tensor& expected) {
  if (actual.sizes() != expected.sizes()) return "shapes differ";
  if (actual.scalar_type() != expected.scalar_type()) return "dtypes differ";
  const at::Tensor differ = (actual.to(at::kFloat) != expected.to(at::kFloat)).flatten().nonzero();
  if (differ.numel() == 0) return "";
  const std::int64_t at = differ[0].item<std::int64_t>();
  return std::to_string(differ.numel()) + " values differ, first at " + std::to_string(at) + ": " +
         std::to_string(actual.flatten()[at].item<float>()) + " vs torchao " +
         std::to_string(expected.flatten()[at].item<float>());
}

TEST(LinearSeam, MixtLinearIsTorchLinearByNameAndNumbers) {
  torch::manual_seed(0);
  torch::nn::Sequential ours = mlp({8, 16, 4});
  torch::nn::Sequential theirs(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 4));
  std::vector<std::string> names;
  for (const auto& item : ours->named_parameters()) names.push_back(item.key());
  EXPECT_THAT(names, ElementsAre("0.weight", "0.bias", "2.weight", "2.bias"));
  EXPECT_NE(ours[0]->as<torch::nn::Linear>(), nullptr) << "zoo init code finds mixt::Linear as torch::nn::Linear";
  {
    at::NoGradGuard no_grad;
    for (const auto& item : theirs->named_parameters()) item.value().copy_(ours->named_parameters()[item.key()]);
  }
  const at::Tensor x = at::randn({5, 8});
  EXPECT_TRUE(at::equal(ours->forward(x), theirs->forward(x)));
  AutocastScope bf16(at::kCPU, at::kBFloat16);
  EXPECT_TRUE(at::equal(ours->forward(x), theirs->forward(x))) << "without a function: at::linear, autocast too";
}

TEST(LinearSeam, AFunctionReplacesHowOneLayerComputes) {
  struct Doubling : LinearFunction {
    int calls = 0;
    at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
      ++calls;
      return 2 * at::linear(input, weight, bias);
    }
  };
  torch::nn::Sequential model = mlp({4, 4, 4});
  const std::vector<LinearLayer> layers = linear_layers(*model);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[1].name, "2");
  const auto doubling = std::make_shared<Doubling>();
  layers[1].set_function(doubling);
  const at::Tensor x = at::randn({3, 4});
  const at::Tensor hidden = at::relu(at::linear(x, layers[0].weight, layers[0].bias));
  EXPECT_TRUE(at::equal(model->forward(x), 2 * at::linear(hidden, layers[1].weight, layers[1].bias)));
  EXPECT_EQ(doubling->calls, 1);
  layers[1].set_function(nullptr);
  EXPECT_TRUE(at::equal(model->forward(x), at::linear(hidden, layers[1].weight, layers[1].bias)));
}

TEST(LinearSeam, TheZooViTListsItsProjectionsMlpsAndHead) {
  const RecipeNodePtr root = parse_yaml(
      "model: {name: vit_b_16, image_size: 32, patch_size: 16, num_layers: 2, num_heads: 2, hidden_dim: 32, "
      "mlp_dim: 64, num_classes: 10}",
      "test.yaml");
  ModelContext context;
  context.sample_shape = {3, 32, 32};
  context.num_classes = 10;
  const auto model = plugins().registry.make_model(Config(root, "").section("model"), context);
  std::vector<std::string> names;
  for (const LinearLayer& layer : linear_layers(*model)) names.push_back(layer.name);
  EXPECT_THAT(names, ElementsAre("encoder.layers.encoder_layer_0.self_attention.in_proj",
                                 "encoder.layers.encoder_layer_0.self_attention.out_proj",
                                 "encoder.layers.encoder_layer_0.mlp.0", "encoder.layers.encoder_layer_0.mlp.3",
                                 "encoder.layers.encoder_layer_1.self_attention.in_proj",
                                 "encoder.layers.encoder_layer_1.self_attention.out_proj",
                                 "encoder.layers.encoder_layer_1.mlp.0", "encoder.layers.encoder_layer_1.mlp.3",
                                 "heads.head"));
  EXPECT_TRUE(model->named_parameters().contains("encoder.layers.encoder_layer_0.self_attention.in_proj_weight"));
}

TEST(Float8Tensorwise, ScaleIsTorchaosAmaxToScale) {
  // 448 / amax, in float64 as reciprocal(amax) * 448, then float32; amax clamped at 1e-12.
  const at::Tensor amax = at::tensor({3.0f});
  EXPECT_EQ(scale_for_float8(amax, at::kFloat8_e4m3fn).item<float>(), static_cast<float>((1.0 / 3.0) * 448.0));
  EXPECT_EQ(scale_for_float8(at::tensor(0.0f), at::kFloat8_e5m2).item<float>(), static_cast<float>(57344.0 / 1e-12));
  const at::Tensor cast = cast_to_float8(at::tensor({1000.0f, -1000.0f}), at::tensor(1.0f), at::kFloat8_e4m3fn);
  EXPECT_TRUE(at::equal(cast.to(at::kFloat), at::tensor({448.0f, -448.0f}))) << "saturated, not inf/NaN";
}

// The generator's layers_case: every layer computed by `function`, one case per dtype.
void expect_layers_equal(const nlohmann::json& cases, const std::shared_ptr<LinearFunction>& function) {
  at::set_num_threads(1);
  for (const auto& c : cases) {
    const at::ScalarType dtype = c["dtype"] == "bfloat16" ? at::kBFloat16 : at::kFloat;
    SCOPED_TRACE(c["dtype"].get<std::string>());
    torch::nn::Sequential model = mlp(c["sizes"].get<std::vector<std::int64_t>>());
    load_layers(model, c["layers"], dtype);
    for (const LinearLayer& layer : linear_layers(*model)) layer.set_function(function);

    const auto shape = c["input_shape"].get<std::vector<std::int64_t>>();
    const at::Tensor x = tensor_of(c["input"], shape, dtype).requires_grad_();
    const at::Tensor y = model->forward(x);
    y.backward(tensor_of(c["grad_output"], y.sizes(), dtype));
    EXPECT_EQ(first_difference(y, tensor_of(c["output"], y.sizes(), dtype)), "") << "output";
    EXPECT_EQ(first_difference(x.grad(), tensor_of(c["grad_input"], shape, dtype)), "") << "input gradient";
    std::size_t i = 0;
    for (const LinearLayer& layer : linear_layers(*model)) {
      EXPECT_EQ(first_difference(layer.weight.grad(), tensor_of(c["grads"][i]["weight"], layer.weight.sizes(), dtype)),
                "")
          << layer.name << ".weight gradient";
      EXPECT_EQ(first_difference(layer.bias.grad(), tensor_of(c["grads"][i]["bias"], layer.bias.sizes(), dtype)), "")
          << layer.name << ".bias gradient";
      ++i;
    }
  }
}

TEST(Float8Tensorwise, LayersEqualTorchaoBitwise) {
  expect_layers_equal(golden()["layers"], std::make_shared<Float8TensorwiseLinear>());
}

TEST(Float8Rowwise, ScalesArePerRowOrColumnAndRoundedDownToAPowerOfTwo) {
  // 448 / 3 = 149.3 -> 128; 448 / 0.25 = 1792 -> 1024; an all-zero row: 448 / 1e-12 -> 2^48.
  const at::Tensor x = at::tensor({3.0f, -0.25f, 0.0f, 0.25f, 0.0f, 0.0f}).reshape({3, 2});
  const at::Tensor rows = rowwise_scale_for_float8(x, -1, at::kFloat8_e4m3fn);
  EXPECT_EQ(rows.sizes(), (std::vector<std::int64_t>{3, 1}));
  EXPECT_TRUE(at::equal(rows.flatten(), at::tensor({128.0f, 1024.0f, 281474976710656.0f /* 2^48 */})));
  const at::Tensor columns = rowwise_scale_for_float8(x, 0, at::kFloat8_e4m3fn);
  EXPECT_EQ(columns.sizes(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE(at::equal(columns.flatten(), at::tensor({128.0f, 1024.0f})));
}

TEST(Float8Rowwise, LayersEqualTorchaosEmulationBitwise) {
  expect_layers_equal(rowwise_golden()["layers"], std::make_shared<Float8RowwiseLinear>());
}

// On CUDA the rowwise recipe is at::_scaled_mm (scale_a M x 1, scale_b 1 x N, reciprocals),
// on the CPU the emulation the tests above hold to torchao. The casts are the same; the
// matmuls differ in accumulation and in CUDA's bfloat16 output, so the two agree to within
// that, not bitwise. Rows and columns of very different magnitudes, so that a scale applied
// to the wrong row or column, or not inverted, is off by powers of two. Runs in the GPU
// pack (bench/gpu/run.sh); skipped without a CUDA device.
TEST(Float8Rowwise, CudaScaledMmAgreesWithTheCpuEmulation) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(0);
  const auto spread = [](at::IntArrayRef shape, std::int64_t dim) {
    std::vector<std::int64_t> sizes(shape.size(), 1);
    sizes[dim] = shape[dim];
    return at::exp2(at::randint(-6, 7, sizes).to(at::kFloat));
  };
  // 2048 rows, 128 -> 96: every dimension a multiple of 16, as _scaled_mm needs on CUDA.
  const at::Tensor x =
      (at::randn({64, 32, 128}) * spread({64, 32, 128}, 2) * spread({64, 32, 128}, 1)).to(at::kBFloat16);
  const at::Tensor weight = (at::randn({96, 128}) * spread({96, 128}, 0) * spread({96, 128}, 1)).to(at::kBFloat16);
  const at::Tensor bias = at::randn({96}).to(at::kBFloat16);
  const at::Tensor grad_output = (at::randn({64, 32, 96}) * spread({64, 32, 96}, 2) * 0.01).to(at::kBFloat16);
  const auto run = [&](at::Device device) {
    const at::Tensor xd = x.to(device).requires_grad_(), wd = weight.to(device).requires_grad_();
    const at::Tensor bd = bias.to(device).requires_grad_();
    const at::Tensor y = float8_rowwise_linear(xd, wd, bd);
    y.backward(grad_output.to(device));
    return std::vector<at::Tensor>{y.cpu(), xd.grad().cpu(), wd.grad().cpu(), bd.grad().cpu()};
  };
  const std::vector<at::Tensor> cpu = run(at::kCPU), cuda = run(at::kCUDA);
  const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(cuda[i].scalar_type(), at::kBFloat16) << names[i];
    const at::Tensor reference = cpu[i].to(at::kDouble);
    const double error = ((cuda[i].to(at::kDouble) - reference).abs().max() / reference.abs().max()).item<double>();
    EXPECT_LT(error, 1e-2) << names[i] << ": CUDA's _scaled_mm vs the CPU emulation, relative to the largest value";
  }
}

// A ragged batch: 35 rows, the weight gradient's inner dimension, which CUDA's _scaled_mm
// takes only in multiples of 16 (mixt pads it with zeros there); the CPU takes any. Both
// recipes, CUDA against the CPU to float8's accuracy. Runs in the GPU pack.
TEST(Float8Linear, ARaggedBatchTrainsOnCudaAsOnTheCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(0);
  const at::Tensor x = at::randn({5, 7, 64}).to(at::kBFloat16);
  const at::Tensor weight = (at::randn({32, 64}) * 0.1).to(at::kBFloat16);
  const at::Tensor grad_output = (at::randn({5, 7, 32}) * 0.01).to(at::kBFloat16);
  using Linear = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&);
  const std::pair<const char*, Linear> recipes[] = {
      {"tensorwise",
       [](const at::Tensor& i, const at::Tensor& w, const at::Tensor& b) { return float8_linear(i, w, b); }},
      {"rowwise", &float8_rowwise_linear}};
  for (const auto& [recipe, linear] : recipes) {
    const auto run = [&, linear = linear](at::Device device) {
      const at::Tensor xd = x.to(device).requires_grad_(), wd = weight.to(device).requires_grad_();
      const at::Tensor y = linear(xd, wd, at::Tensor());
      y.backward(grad_output.to(device));
      return std::vector<at::Tensor>{y.cpu(), xd.grad().cpu(), wd.grad().cpu()};
    };
    const std::vector<at::Tensor> cpu = run(at::kCPU), cuda = run(at::kCUDA);
    const char* names[] = {"output", "input gradient", "weight gradient"};
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      const at::Tensor reference = cpu[i].to(at::kDouble);
      const double error = ((cuda[i].to(at::kDouble) - reference).abs().max() / reference.abs().max()).item<double>();
      EXPECT_LT(error, 5e-2) << recipe << " " << names[i];
    }
  }
}

TEST(Float8Tensorwise, AVitBlockEqualsTorchaoBitwise) {
  at::set_num_threads(1);
  const auto& c = golden()["vit"];
  std::string yaml = "model: {name: vit_b_16";
  for (const auto& [key, value] : c["options"].items()) yaml += ", " + key + ": " + value.dump();
  const RecipeNodePtr root = parse_yaml(yaml + "}", "test.yaml");
  ModelContext context;
  context.sample_shape = {3, c["options"]["image_size"].get<std::int64_t>(), c["options"]["image_size"].get<std::int64_t>()};
  context.num_classes = c["options"]["num_classes"].get<std::int64_t>();
  const auto model = plugins().registry.make_model(Config(root, "").section("model"), context);
  cast_model(*model, at::kBFloat16, [](const std::string&) { return false; });
  {
    at::NoGradGuard no_grad;
    for (const auto& item : model->named_parameters()) {
      ASSERT_TRUE(c["weights"].contains(item.key())) << item.key();
      item.value().set_data(tensor_of(c["weights"][item.key()], item.value().sizes(), at::kBFloat16));
    }
  }
  const auto function = std::make_shared<Float8TensorwiseLinear>();
  std::vector<std::string> names;
  for (const LinearLayer& layer : linear_layers(*model)) {
    layer.set_function(function);
    names.push_back(layer.name);
  }
  EXPECT_EQ(names, c["float8_layers"].get<std::vector<std::string>>()) << "the layers torchao swaps";

  const auto shape = c["input_shape"].get<std::vector<std::int64_t>>();
  const at::Tensor x = tensor_of(c["input"], shape, at::kBFloat16).requires_grad_();
  const at::Tensor y = model->forward(x);
  y.backward(tensor_of(c["grad_output"], y.sizes(), at::kBFloat16));
  EXPECT_EQ(first_difference(y, tensor_of(c["output"], y.sizes(), at::kBFloat16)), "") << "output";
  EXPECT_EQ(first_difference(x.grad(), tensor_of(c["grad_input"], shape, at::kBFloat16)), "") << "input gradient";
  for (const auto& item : model->named_parameters()) {
    EXPECT_EQ(first_difference(item.value().grad(), tensor_of(c["grads"][item.key()], item.value().sizes(), at::kBFloat16)),
              "")
        << item.key() << " gradient";
  }
}

std::unique_ptr<PrecisionPolicy> make_policy(const std::string& yaml) {
  const RecipeNodePtr root = parse_yaml("precision: " + yaml, "test.yaml");
  return plugins().registry.make_precision(Config(root, "").section("precision"), PrecisionContext{});
}

std::vector<std::string> float8_layer_names(torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const LinearLayer& layer : linear_layers(model)) {
    if (layer.owner->linear_function(layer.map)) names.push_back(layer.name);
  }
  return names;
}

// The trainer's step (docs/writing-a-policy.md, "The contract") on fixed batches, under `policy`.
void expect_training_equal(const nlohmann::json& c, const std::string& policy_name) {
  at::set_num_threads(1);
  torch::nn::Sequential model = mlp(c["sizes"].get<std::vector<std::int64_t>>());
  load_layers(model, c["layers"], at::kFloat);
  auto policy = make_policy("{name: " + policy_name + "}");
  policy->setup(*model, at::kCPU);
  EXPECT_THAT(float8_layer_names(*model), ElementsAre("2", "4")) << "the first and the last stay bfloat16";

  const RecipeNodePtr root = parse_yaml("optimizer: " + c["optimizer"].dump(), "golden");
  auto optimizer = plugins().registry.make_optimizer(Config(root, "").section("optimizer"),
                                                     OptimizerContext{policy->optimizer_parameters(*model)});
  const std::int64_t in = c["sizes"][0].get<std::int64_t>();
  std::int64_t step = 0;
  for (const auto& batch : c["batches"]) {
    ++step;
    policy->begin_step(step, false);
    optimizer->zero_grad();
    const at::Tensor x = tensor_of(batch["input"], {-1, in});
    const at::Tensor labels = at::tensor(batch["labels"].get<std::vector<std::int64_t>>());
    at::Tensor loss;
    {
      const AutocastScope scope = policy->autocast(at::kCPU);
      loss = at::cross_entropy_loss(model->forward(policy->prepare_input(x)), labels);
    }
    policy->backward(loss);
    policy->gradients_ready(*optimizer);
    EXPECT_TRUE(policy->step(*optimizer).applied());
    policy->update();
    EXPECT_EQ(loss.item<float>(), c["losses"][step - 1].get<float>()) << "step " << step;
  }
  std::size_t i = 0;
  for (const at::Tensor& master : optimizer->parameters()) {
    EXPECT_EQ(first_difference(master, tensor_of(c["masters"][i], master.sizes())), "") << "master " << i;
    ++i;
  }
  EXPECT_EQ(i, c["masters"].size());
}

TEST(Fp8TensorwisePolicy, TwentyAdamWStepsEqualTorchaoBitwise) {
  expect_training_equal(golden()["training"], "fp8_tensorwise");
}

TEST(Fp8RowwisePolicy, TwentyAdamWStepsEqualTorchaosEmulationBitwise) {
  expect_training_equal(rowwise_golden()["training"], "fp8_rowwise");
}

// fp8_delayed against the delayed-scaling reference of the generator, stopped after step 10,
// checkpointed (policy and optimizer), rebuilt and resumed: the same 20 losses, the scales
// after every step and the final masters, bit for bit.
TEST(Fp8DelayedPolicy, TwentyStepsWithAResumeEqualTheReferenceBitwise) {
  at::set_num_threads(1);
  for (const auto& c : golden()["delayed"]) {
    SCOPED_TRACE(c["options"].dump());
    nlohmann::json section = c["options"];
    section["name"] = "fp8_delayed";
    const auto sizes = c["sizes"].get<std::vector<std::int64_t>>();
    const RecipeNodePtr optimizer_root = parse_yaml("optimizer: {name: adamw, lr: 0.01, weight_decay: 0.01}", "t");
    struct Run {
      torch::nn::Sequential model;
      std::unique_ptr<PrecisionPolicy> policy;
      std::unique_ptr<Optimizer> optimizer;
    };
    const auto build = [&](const torch::nn::Sequential* from) {
      Run run{mlp(sizes), make_policy(section.dump()), nullptr};
      load_layers(run.model, c["layers"], at::kFloat);
      if (from) {  // the checkpoint's model: the bfloat16 weights as they were
        at::NoGradGuard no_grad;
        for (const auto& item : (*from)->named_parameters()) {
          run.model->named_parameters()[item.key()].set_data(item.value().detach().clone());
        }
      }
      run.policy->setup(*run.model, at::kCPU);
      run.optimizer = plugins().registry.make_optimizer(Config(optimizer_root, "").section("optimizer"),
                                                        OptimizerContext{run.policy->optimizer_parameters(*run.model)});
      return run;
    };
    Run run = build(nullptr);
    EXPECT_THAT(float8_layer_names(*run.model), ElementsAre("2", "4"));
    const std::int64_t in = sizes[0];
    for (std::size_t step = 0; step < c["batches"].size(); ++step) {
      if (step == 10) {
        std::stringstream policy_state, optimizer_state;
        {
          torch::serialize::OutputArchive policy_archive, optimizer_archive;
          run.policy->save(policy_archive);
          run.optimizer->save(optimizer_archive);
          policy_archive.save_to(policy_state);
          optimizer_archive.save_to(optimizer_state);
        }
        Run resumed = build(&run.model);
        torch::serialize::InputArchive policy_archive, optimizer_archive;
        policy_archive.load_from(policy_state);
        optimizer_archive.load_from(optimizer_state);
        resumed.policy->load(policy_archive);
        resumed.optimizer->load(optimizer_archive);
        run = std::move(resumed);
      }
      const auto& batch = c["batches"][step];
      run.policy->begin_step(static_cast<std::int64_t>(step) + 1, false);
      run.optimizer->zero_grad();
      at::Tensor loss;
      {
        const AutocastScope scope = run.policy->autocast(at::kCPU);
        loss = at::cross_entropy_loss(run.model->forward(tensor_of(batch["input"], {-1, in})),
                                      at::tensor(batch["labels"].get<std::vector<std::int64_t>>()));
      }
      run.policy->backward(loss);
      run.policy->gradients_ready(*run.optimizer);
      run.policy->step(*run.optimizer);
      run.policy->update();
      EXPECT_EQ(loss.item<float>(), c["losses"][step].get<float>()) << "step " << step + 1;
      torch::serialize::OutputArchive archive;
      run.policy->save(archive);
      std::stringstream bytes;
      archive.save_to(bytes);
      torch::serialize::InputArchive read;
      read.load_from(bytes);
      at::Tensor scales;
      read.read("fp8_scales", scales);
      std::vector<float> expected;  // per float8 layer: input, weight, output gradient
      for (const auto& layer : c["scales"][step]) {
        for (const auto& value : layer) expected.push_back(value.get<float>());
      }
      EXPECT_EQ(first_difference(scales, at::tensor(expected).reshape({2, 3})), "") << "scales after step " << step + 1;
    }
    std::size_t i = 0;
    for (const at::Tensor& master : run.optimizer->parameters()) {
      EXPECT_EQ(first_difference(master, tensor_of(c["masters"][i], master.sizes())), "") << "master " << i;
      ++i;
    }
  }
}

TEST(Fp8TensorwisePolicy, OptionsChooseTheLayers) {
  {
    torch::nn::Sequential model = mlp({32, 48, 64, 32, 10});
    make_policy("{name: fp8_tensorwise, fp8_exclude: ['4']}")->setup(*model, at::kCPU);
    EXPECT_THAT(float8_layer_names(*model), ElementsAre("2"));
  }
  {
    torch::nn::Sequential model = mlp({32, 48, 64, 32, 10});
    make_policy("{name: fp8_tensorwise, fp8_modules: ['[04]'], exclude_first_last: false}")->setup(*model, at::kCPU);
    EXPECT_THAT(float8_layer_names(*model), ElementsAre("0", "4"));
  }
  {
    // 32 -> 10: 10 is not a multiple of 16, so the layer stays in bfloat16 and says so.
    torch::nn::Sequential model = mlp({32, 48, 64, 32, 10});
    ::testing::internal::CaptureStderr();
    make_policy("{name: fp8_tensorwise, exclude_first_last: false}")->setup(*model, at::kCPU);
    const std::string warned = ::testing::internal::GetCapturedStderr();
    EXPECT_THAT(float8_layer_names(*model), ElementsAre("0", "2", "4"));
    EXPECT_THAT(warned, HasSubstr("1 linear layer(s) stay in bfloat16"));
    EXPECT_THAT(warned, HasSubstr("6 (32 -> 10)"));
  }
}

TEST(Fp8TensorwisePolicy, CheckCountsTheFloat8LayersAndWarnsOfTheMisalignedOnce) {
  const testing::CommandResult result =
      testing::run_mixt({"check", testing::configured::source_dir() + "/recipes/fashion_mnist.yaml",
                         "precision.name=fp8_tensorwise", "precision.exclude_first_last=false"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  // simple_cnn's classifier: 3136 -> 128 in float8, 128 -> 10 in bfloat16; the FLOPs by hand.
  EXPECT_THAT(result.output, HasSubstr("linear    2 layers, 1 computed by the precision policy (float8 under "
                                       "fp8_*): 99.7% of their FLOPs"));
  const std::string warning = "stay in bfloat16, their dimensions not multiples of 16 (at::_scaled_mm's "
                              "requirement): classifier.3 (128 -> 10)";
  ASSERT_THAT(result.output, HasSubstr(warning));
  EXPECT_EQ(result.output.find(warning), result.output.rfind(warning)) << "once";
}

}  // namespace
}  // namespace mixt
