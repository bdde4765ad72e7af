// The precision plugins through the real trainer on a tiny problem: injected overflows are
// skipped exactly (amp_fp16, custom_scaler), the scale backs off, weights stay finite, and
// amp_bf16 never skips the same data; scaler state survives a checkpoint; recipe errors;
// tf32/fp32 math modes; precision.fp32_modules through mixt::call_submodule.
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <set>

#include "blob_training.h"
#include "assembly/components.h"
#include "mixt/helpers/fp32_modules.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "expect_error.h"
#include "test_support.h"
#include "train/trainer.h"

namespace mixt {
namespace {

using testing::BlobDataset;
using testing::TinyMlp;

// Remembers which optimizer steps (0-based, counted by zero_grad) were applied.
class RecordingOptimizer : public Optimizer {
 public:
  explicit RecordingOptimizer(std::unique_ptr<Optimizer> inner) : inner_(std::move(inner)) {}
  void step() override {
    applied.push_back(index_);
    inner_->step();
  }
  void zero_grad() override {
    ++index_;
    inner_->zero_grad();
  }
  std::vector<at::Tensor> parameters() const override { return inner_->parameters(); }
  double learning_rate() const override { return inner_->learning_rate(); }
  void set_learning_rate(double lr) override { inner_->set_learning_rate(lr); }
  void save(torch::serialize::OutputArchive& a) override { inner_->save(a); }
  void load(torch::serialize::InputArchive& a) override { inner_->load(a); }
  std::vector<std::int64_t> applied;

 private:
  std::unique_ptr<Optimizer> inner_;
  std::int64_t index_ = -1;
};

testing::BuiltPlugins& plugins() {
  static testing::BuiltPlugins built;
  return built;
}

std::unique_ptr<PrecisionPolicy> make_policy(const std::string& yaml) {
  RecipeNodePtr root = parse_yaml("precision: " + yaml, "test.yaml");
  return plugins().registry.make_precision(Config(root, "").section("precision"), PrecisionContext{});
}

struct Training {
  Components components;
  RunFacts facts;
  Progress progress{false, 1000};
  RecordingOptimizer* optimizer = nullptr;

  Training(const std::string& policy, std::set<std::int64_t> overflow = {}) {
    at::manual_seed(0);
    auto data = std::make_unique<BlobDataset>(5);
    data->overflow_at(std::move(overflow));
    components.train = std::move(data);
    components.model = std::make_shared<TinyMlp>();
    components.precision = make_policy(policy);
    components.task = plugins().classification();
    components.precision->setup(*components.model, at::kCPU);
    RecipeNodePtr root = parse_yaml("optimizer: {name: sgd, lr: 0.05, momentum: 0.9}", "test.yaml");
    OptimizerContext context;
    for (const auto& p : components.model->named_parameters()) {
      context.named_parameters.emplace_back(p.key(), p.value());
    }
    auto recording = std::make_unique<RecordingOptimizer>(
        plugins().registry.make_optimizer(Config(root, "").section("optimizer"), context));
    optimizer = recording.get();
    components.optimizer = std::move(recording);
  }
  TrainResult fit(std::int64_t accumulate = 1) {
    TrainerOptions o;
    o.epochs = 1;
    o.log_every = 1000;
    o.clip_grad_norm = 1.0;  // also exercises unscale-before-clip
    o.accumulate = accumulate;
    return Trainer(components, facts, o, nullptr, progress).fit();
  }
  double metric(const std::string& name) const {
    for (const auto& [key, value] : components.precision->metrics()) {
      if (key == name) return value;
    }
    return NAN;
  }
  bool finite_weights() const {
    for (const auto& p : components.model->parameters()) {
      if (!at::isfinite(p).all().item<bool>()) return false;
    }
    return true;
  }
};

std::vector<std::int64_t> all_but(std::int64_t n, std::set<std::int64_t> skipped) {
  std::vector<std::int64_t> steps;
  for (std::int64_t i = 0; i < n; ++i) {
    if (!skipped.count(i)) steps.push_back(i);
  }
  return steps;
}

TEST(PrecisionPolicies, AmpFp16SkipsExactlyTheOverflowingStepsAndBacksOff) {
  Training run("{name: amp_fp16, init_scale: 1024}", {3, 9});
  const TrainResult result = run.fit();
  EXPECT_EQ(result.optimizer_steps, 16);
  EXPECT_EQ(result.skipped_steps, 2);
  EXPECT_EQ(run.optimizer->applied, all_but(16, {3, 9}));
  EXPECT_EQ(run.metric("loss_scale"), 1024.0 / 4);
  EXPECT_TRUE(run.finite_weights());
}

// A run whose forward overflows float16 on most batches skips most steps; and a validation
// that overflows gives an inf/NaN loss. Either ended "done" without a word; each is a warning.
TEST(PrecisionPolicies, MostStepsSkippedOrANonFiniteValidationLossIsWarnedAbout) {
  Training run("{name: amp_fp16, init_scale: 1024}", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto val = std::make_unique<BlobDataset>(6);
  val->overflow_at({0});
  run.components.val = std::move(val);
  ::testing::internal::CaptureStderr();
  const TrainResult result = run.fit();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(result.skipped_steps, 10);
  EXPECT_THAT(said, HasSubstr("mixt: warning: the precision policy skipped 10 of the 16 steps of epoch 1 (inf/NaN "
                      "gradients), so the weights barely trained; run `mixt diagnose` on the recipe: it finds the "
                      "submodules to keep in float32 (precision.fp32_modules)"))
      << said;
  ASSERT_TRUE(result.final_eval);
  EXPECT_FALSE(std::isfinite(result.final_eval->loss));
  EXPECT_THAT(said, HasSubstr("mixt: warning: the validation loss after epoch 1 is "));

  Training fine("{name: amp_fp16, init_scale: 1024}", {3, 9});  // 2 of 16: the scaler's business
  ::testing::internal::CaptureStderr();
  fine.fit();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), Not(HasSubstr("warning")));
}

TEST(PrecisionPolicies, AmpFp16WithAccumulationSkipsTheStepThatHoldsTheOverflow) {
  Training run("{name: amp_fp16, init_scale: 1024, growth_interval: 3}", {5});  // micro-batch 5: step 1 of 0..3
  const TrainResult result = run.fit(/*accumulate=*/4);
  EXPECT_EQ(result.optimizer_steps, 4);
  EXPECT_EQ(run.optimizer->applied, all_but(4, {1}));
  // 1 good step, back off (tracker reset), 2 good steps: 1024 * 0.5, no growth yet.
  EXPECT_EQ(run.metric("loss_scale"), 512.0);
}

TEST(PrecisionPolicies, CustomScalerToleratesHysteresisThenBacksOff) {
  Training run("{name: custom_scaler, init_scale: 1024, hysteresis: 2}", {3, 9, 12});
  const TrainResult result = run.fit();
  EXPECT_EQ(result.skipped_steps, 3);
  EXPECT_EQ(run.optimizer->applied, all_but(16, {3, 9, 12}));
  // Overflow 1 spends the hysteresis, overflows 2 and 3 back off (Megatron: the hysteresis
  // only refills when the scale grows).
  EXPECT_EQ(run.metric("loss_scale"), 1024.0 / 4);
  EXPECT_TRUE(run.finite_weights());
}

TEST(PrecisionPolicies, CustomScalerStaticKeepsItsScaleAndBoundsHold) {
  Training fixed("{name: custom_scaler, mode: static, init_scale: 1024}", {3});
  EXPECT_EQ(fixed.fit().skipped_steps, 1);
  EXPECT_EQ(fixed.metric("loss_scale"), 1024.0);
  Training bounded("{name: custom_scaler, init_scale: 4, min_scale: 2, hysteresis: 1, growth_interval: 100}",
                   {1, 2, 3});
  bounded.fit();
  EXPECT_EQ(bounded.metric("loss_scale"), 2.0);
  Training capped("{name: custom_scaler, init_scale: 4, max_scale: 8, growth_interval: 2}");
  capped.fit();
  EXPECT_EQ(capped.metric("loss_scale"), 8.0);
}

TEST(PrecisionPolicies, AmpBf16NeverSkipsTheSameData) {
  Training run("{name: amp_bf16}", {3, 9});
  const TrainResult result = run.fit();
  EXPECT_EQ(result.skipped_steps, 0);
  EXPECT_EQ(run.optimizer->applied, all_but(16, {}));
  EXPECT_TRUE(run.finite_weights());
  EXPECT_TRUE(run.components.precision->metrics().empty());
}

TEST(PrecisionPolicies, AmpBf16RejectsScalerOptionsAndSaysWhy) {
  SCOPED_TRACE(::testing::Message() << "expected a recipe error");
  const Error e = testing::thrown_error([&] {
    make_policy("{name: amp_bf16, init_scale: 1024}");
  });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_THAT(e.what(), HasSubstr("does not scale the loss"));
  EXPECT_THAT(e.what(), HasSubstr("test.yaml:1:"));
}

TEST(PrecisionPolicies, AmpFp16RejectsTorchsInvalidFactors) {
  EXPECT_THROW(make_policy("{name: amp_fp16, growth_factor: 1.0}"), Error);
  EXPECT_THROW(make_policy("{name: amp_fp16, backoff_factor: 1.5}"), Error);
  EXPECT_THROW(make_policy("{name: custom_scaler, mode: static, hysteresis: 3}"), Error);
}

// A scale outside float32's normal range failed at the first step with LibTorch's "value
// cannot be converted to type float without overflow" (after the run directory existed),
// or, as tiny as 1e-46, became 0 and let a NaN step through into a checkpoint.
TEST(PrecisionPolicies, AScaleOutsideFloat32sRangeIsARecipeError) {
  for (const char* recipe : {"{name: amp_fp16, init_scale: 1.0e-46}", "{name: amp_fp16, init_scale: 1.0e+39}",
                             "{name: custom_scaler, init_scale: 1.0e-300, min_scale: 1.0e-300}",
                             "{name: custom_scaler, max_scale: 1.0e+39}",
                             "{name: custom_scaler, mode: static, init_scale: 1.0e+39}"}) {
    try {
      make_policy(recipe);
      ADD_FAILURE() << "expected a recipe error for " << recipe;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << recipe;
      EXPECT_THAT(e.what(), HasSubstr("must lie in float32's normal range"));
    }
  }
}

// amp_bf16 probes for scaler options it rejects; the probe must not make them "known keys"
// that an unknown key's hint then offers.
TEST(PrecisionPolicies, AmpBf16OffersNoScalerOptionForAnUnknownKey) {
  const RecipeNodePtr root = parse_yaml("precision: {name: amp_bf16, fooo: 1}", "test.yaml");
  plugins().registry.make_precision(Config(root, "").section("precision"), {});
  SCOPED_TRACE(::testing::Message() << "expected an unknown key");
  const Error e = testing::thrown_error([&] {
    check_unknown_keys(*root);
  });
  EXPECT_THAT(e.message(), HasSubstr("unknown key 'fooo'"));
  EXPECT_THAT(e.hint(), Not(HasSubstr("init_scale")));
}

// Resumed, custom_scaler keeps the recipe's options: a dynamic scale within the recipe's
// bounds (a checkpoint's 2048 under max_scale 256), a static scale the recipe's own (the
// checkpoint's scale replaced it, and a scale the recipe never asked for skipped steps).
TEST(PrecisionPolicies, CustomScalerResumedKeepsTheRecipesBoundsAndStaticScale) {
  testing::TempDir dir;
  Training first("{name: custom_scaler, init_scale: 1024, growth_interval: 8}");
  first.fit();
  ASSERT_EQ(first.metric("loss_scale"), 4096.0);  // grown twice in 16 good steps
  {
    TrainerOptions o;
    Trainer(first.components, first.facts, o, nullptr, first.progress).save_checkpoint(dir.path() / "ckpt");
  }
  for (const auto& [recipe, expected] : std::vector<std::pair<std::string, double>>{
           {"{name: custom_scaler, init_scale: 64, max_scale: 256}", 256.0},
           {"{name: custom_scaler, mode: static, init_scale: 64}", 64.0}}) {
    Training resumed(recipe);
    TrainerOptions o;
    Trainer(resumed.components, resumed.facts, o, nullptr, resumed.progress).resume(dir.path() / "ckpt");
    EXPECT_EQ(resumed.metric("loss_scale"), expected) << recipe;
  }
}

// A checkpoint of a disabled scaler (no state) resumed with the scaler enabled: GradScaler's
// own words, as a recipe error at trainer.resume naming the checkpoint (it was a runtime
// error with neither).
TEST(PrecisionPolicies, ResumingADisabledScalersCheckpointEnabledIsARecipeError) {
  testing::TempDir dir;
  Training first("{name: amp_fp16, enabled: false}");
  {
    TrainerOptions o;
    Trainer(first.components, first.facts, o, nullptr, first.progress).save_checkpoint(dir.path() / "ckpt");
  }
  Training second("{name: amp_fp16}");
  TrainerOptions o;
  SCOPED_TRACE(::testing::Message() << "expected a recipe error");
  const Error e = testing::thrown_error(
      [&] { Trainer(second.components, second.facts, o, nullptr, second.progress).resume(dir.path() / "ckpt"); });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_EQ(e.key_path(), "trainer.resume");
  EXPECT_THAT(e.what(), HasSubstr("ckpt"));
  EXPECT_THAT(e.message(), HasSubstr("the checkpoint's precision state does not fit this recipe: The source state dict "
                             "is empty"))
      << e.message();
}

TEST(PrecisionPolicies, ScalerStateIsRestoredFromACheckpoint) {
  testing::TempDir dir;
  Training first("{name: amp_fp16, init_scale: 1024, growth_interval: 5}", {2});
  first.fit();
  const double scale = first.metric("loss_scale");
  EXPECT_EQ(scale, 2048.0);  // backed off at step 2, then 13 good steps: grown twice (after 5 and 10)
  {
    TrainerOptions o;
    Trainer(first.components, first.facts, o, nullptr, first.progress).save_checkpoint(dir.path() / "ckpt");
  }
  Training second("{name: amp_fp16, init_scale: 1024, growth_interval: 5}");
  TrainerOptions o;
  Trainer trainer(second.components, second.facts, o, nullptr, second.progress);
  trainer.resume(dir.path() / "ckpt");
  EXPECT_EQ(second.metric("loss_scale"), scale);
  // The policy's state is GradScaler.state_dict(): Python's five keys.
  torch::serialize::OutputArchive archive;
  second.components.precision->save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  std::istringstream stream(bytes.str());
  torch::serialize::InputArchive reread;
  reread.load_from(stream);
  std::vector<std::string> keys = reread.keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"_growth_tracker", "backoff_factor", "growth_factor", "growth_interval",
                                            "scale"}));
}

TEST(PrecisionPolicies, Tf32TurnsTensorCoreMathOnAndFp32TurnsItOff) {
  auto& context = at::globalContext();
  torch::nn::Linear model(2, 2);
  make_policy("{name: tf32}")->setup(*model, at::kCPU);
  EXPECT_EQ(context.float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL), at::Float32Precision::TF32);
  EXPECT_EQ(context.float32Precision(at::Float32Backend::CUDA, at::Float32Op::CONV), at::Float32Precision::TF32);
  make_policy("{name: fp32}")->setup(*model, at::kCPU);
  EXPECT_EQ(context.float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL), at::Float32Precision::IEEE);
  EXPECT_EQ(context.float32Precision(at::Float32Backend::CUDA, at::Float32Op::CONV), at::Float32Precision::IEEE);
}

// The list is kept by the model's address: a model built where a freed one lived must not
// inherit the freed model's list. Both are built in one buffer, so the address is the same.
TEST(Fp32Modules, AModelAtAFreedModelsAddressStartsWithoutItsList) {
  alignas(TinyMlp) static unsigned char storage[sizeof(TinyMlp)];
  const auto build = [] { return std::shared_ptr<TinyMlp>(new (storage) TinyMlp, [](TinyMlp* m) { m->~TinyMlp(); }); };
  auto first = build();
  set_fp32_modules(*first, {"out"});
  EXPECT_TRUE(keeps_in_fp32(*first, "out"));
  first.reset();
  auto second = build();
  EXPECT_FALSE(keeps_in_fp32(*second, "out"));
  EXPECT_EQ(unrouted_fp32_modules(*second), std::vector<std::string>{});
}

TEST(Fp32Modules, ListedSubmodulesRunInFullPrecision) {
  TinyMlp model;
  const at::Tensor x = at::randn({2, 8});
  {
    AutocastScope scope(at::kCPU, at::kBFloat16);
    EXPECT_EQ(model.forward(x).scalar_type(), at::kBFloat16);
    set_fp32_modules(model, {"out"});
    EXPECT_EQ(model.forward(x).scalar_type(), at::kFloat);
  }
  EXPECT_TRUE(unrouted_fp32_modules(model).empty());
  set_fp32_modules(model, {"hidden"});  // TinyMlp never routes "hidden"
  model.forward(x);
  EXPECT_EQ(unrouted_fp32_modules(model), std::vector<std::string>{"hidden"});
  set_fp32_modules(model, {});
}

// A recipe's components with `policy`, on a small CNN and synthetic data (2 steps an epoch);
// `facts`, what building them found.
Components build_with(RunFacts& facts, const std::string& policy, const testing::BuiltPlugins& built = plugins(),
                      const std::string& model = "{name: simple_cnn, channels: [4, 8], hidden: 16}",
                      const std::string& optimizer = "{name: sgd, lr: 0.1, momentum: 0.9}") {
  at::manual_seed(0);
  const RecipeNodePtr root = parse_yaml(
      "model: " + model + "\nprecision: " + policy + "\noptimizer: " + optimizer + "\n"
          "data: {train: {name: synthetic, shape: [1, 28, 28], num_classes: 10, size: 64, batch_size: 32}}\n",
      "r.yaml");
  const Config recipe(root, "");
  TrainerOptions options;
  options.device = "cpu";
  return build_components(recipe, built.registry, options, recipe.section("trainer"), facts);
}

// mixt check's blank forward pass runs after the policy's setup() and under its autocast,
// as training does: a policy whose setup casts the model to float64 (and feeds it float32
// batches) is a recipe error when the components are built, not a failure at step 1.
class CastsToDouble final : public PrecisionPolicy {
 public:
  void setup(torch::nn::Module& model, at::Device) override { model.to(at::kDouble); }
};

TEST(PrecisionContract, TheBlankForwardPassRunsAfterSetup) {
  testing::BuiltPlugins local;  // its own registry: the fixture policy is added to it alone
  local.registry.register_precision("fixture_casts_to_double", {"casts the model to float64", {}},
                               [](const Config&, const PrecisionContext&) -> std::unique_ptr<PrecisionPolicy> {
                                 return std::make_unique<CastsToDouble>();
                               });
  const auto build = [&](const std::string& policy) {
    RunFacts facts;
    return build_with(facts, "{name: " + policy + "}", local);
  };
  EXPECT_NO_THROW(build("fp32"));
  try {
    build("fixture_casts_to_double");
    ADD_FAILURE() << "built a model the policy had cast away from its input";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::recipe);
    EXPECT_THAT(e.message(), HasSubstr("the model cannot take the training samples"));
  }
}

// A policy sees the recipe's precision.fp32_modules (a policy that casts the model must
// leave them float32, so it has to know them).
TEST(PrecisionContract, APolicySeesTheFp32ModulesOfTheRecipe) {
  testing::BuiltPlugins local;
  std::vector<std::string> seen = {"not called"};
  local.registry.register_precision("fixture_sees_fp32_modules", {"records its context", {}},
                               [&](const Config&, const PrecisionContext& context) -> std::unique_ptr<PrecisionPolicy> {
                                 seen = context.fp32_modules;
                                 return std::make_unique<PrecisionPolicy>();
                               });
  RunFacts facts;
  build_with(facts, "{name: fixture_sees_fp32_modules, fp32_modules: [classifier]}", local);
  EXPECT_EQ(seen, std::vector<std::string>{"classifier"});
}

bool representable_in(const at::Tensor& t, at::ScalarType dtype) { return at::equal(t.to(dtype).to(at::kFloat), t); }

// The optimizer holds one float32 master per model parameter; after two epochs the model
// holds the masters' rounding to `reduced` (float32 where the policy kept it) while the
// masters hold values `reduced` cannot.
void train_and_expect_masters_rounded_into_model(Components& c, const RunFacts& facts, at::ScalarType reduced) {
  const std::vector<at::Tensor> masters = c.optimizer->parameters();
  ASSERT_EQ(masters.size(), c.model->parameters().size());
  for (const auto& m : masters) EXPECT_EQ(m.scalar_type(), at::kFloat);
  Progress progress{false, 1000};
  TrainerOptions o;
  o.epochs = 2;
  o.log_every = 1000;
  const TrainResult result = Trainer(c, facts, o, nullptr, progress).fit();
  EXPECT_LT(result.skipped_steps, result.optimizer_steps) << "every step skipped: nothing was trained";
  bool finer_than_model = false;
  const auto parameters = c.model->parameters();
  for (std::size_t i = 0; i < masters.size(); ++i) {
    EXPECT_TRUE(at::equal(parameters[i], masters[i].to(parameters[i].scalar_type()))) << i;
    if (parameters[i].scalar_type() == reduced) finer_than_model |= !representable_in(masters[i], reduced);
  }
  EXPECT_TRUE(finer_than_model) << "the masters hold only what " << c10::toString(reduced) << " holds";
}

// bf16_master: the model is bfloat16 (but for its fp32_modules), the optimizer updates
// float32 masters, and after each step the model holds the masters' rounding while the
// masters keep what bfloat16 cannot.
TEST(MasterWeights, Bf16MasterTrainsFloat32MastersAndRoundsThemIntoTheModel) {
  RunFacts facts;
  Components c = build_with(facts, "{name: bf16_master, fp32_modules: [classifier]}");
  for (const auto& p : c.model->named_parameters()) {
    EXPECT_EQ(p.value().scalar_type(), p.key().rfind("classifier.", 0) == 0 ? at::kFloat : at::kBFloat16) << p.key();
  }
  train_and_expect_masters_rounded_into_model(c, facts, at::kBFloat16);
}

// A run resumed from its first epoch's checkpoint ends bit for bit where the uninterrupted
// one does: the masters and the loss scaler (the policy's part of the checkpoint) included.
TEST(MasterWeights, ReducedPrecisionPoliciesResumeExactly) {
  // fp32: the harness holds
  for (const std::string policy : {"{name: fp32}", "{name: bf16_master}", "{name: fp16_master, growth_interval: 1}",
                                   "{name: bf16_true}"}) {
    Progress progress{false, 1000};
    TrainerOptions o;
    o.log_every = 1000;
    o.epochs = 2;
    RunFacts whole_facts, first_facts, second_facts;
    Components whole = build_with(whole_facts, policy);
    Trainer(whole, whole_facts, o, nullptr, progress).fit();

    testing::TempDir dir;
    RunDirectory run(dir.path(), "resume");
    o.epochs = 1;
    Components first = build_with(first_facts, policy);
    Trainer(first, first_facts, o, &run, progress).fit();
    o.epochs = 2;
    Components second = build_with(second_facts, policy);
    Trainer resumed(second, second_facts, o, nullptr, progress);
    resumed.resume(run.checkpoints() / "epoch-0001");
    resumed.fit();
    const auto a = whole.optimizer->parameters(), b = second.optimizer->parameters();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << policy << " master " << i;
    const auto ma = whole.model->parameters(), mb = second.model->parameters();
    for (std::size_t i = 0; i < ma.size(); ++i) EXPECT_TRUE(at::equal(ma[i], mb[i])) << policy << " model " << i;
    const auto metrics_a = whole.precision->metrics(), metrics_b = second.precision->metrics();
    EXPECT_EQ(metrics_a, metrics_b) << policy << ": the loss scale";
  }
}

// fp16_master (Apex O2): a float16 model but for batch norm and fp32_modules, float32
// masters in the optimizer, rounded into the model after each step.
TEST(MasterWeights, Fp16MasterKeepsBatchNormInFloat32AndTrainsFloat32Masters) {
  RunFacts facts;
  Components c = build_with(facts, "{name: fp16_master, fp32_modules: [classifier]}", plugins(),
                            "{name: simple_cnn, channels: [4, 8], hidden: 16, batch_norm: true}");
  bool saw_batch_norm = false;
  for (const auto& m : c.model->named_modules("", false)) {
    const bool batch_norm = dynamic_cast<const torch::nn::BatchNorm2dImpl*>(m.value().get()) != nullptr;
    saw_batch_norm |= batch_norm;
    const bool full = batch_norm || m.key().rfind("classifier", 0) == 0;
    for (const auto& p : m.value()->named_parameters(false)) {
      EXPECT_EQ(p.value().scalar_type(), full ? at::kFloat : at::kHalf) << m.key() << "." << p.key();
    }
    for (const auto& b : m.value()->named_buffers(false)) {
      if (b.value().is_floating_point()) {
        EXPECT_EQ(b.value().scalar_type(), full ? at::kFloat : at::kHalf) << b.key();
      }
    }
  }
  ASSERT_TRUE(saw_batch_norm);
  train_and_expect_masters_rounded_into_model(c, facts, at::kHalf);
}

// The loss scaler works on the masters' float32 gradients: a scale that overflows float16
// makes every gradient inf, every step is skipped, masters and model stay as they were.
TEST(MasterWeights, Fp16MasterSkipsAStepWhoseScaledGradientsOverflow) {
  RunFacts facts;
  Components c = build_with(facts, "{name: fp16_master, init_scale: 1.0e+30, growth_interval: 1000}");
  std::vector<at::Tensor> before;
  for (const auto& m : c.optimizer->parameters()) before.push_back(m.clone());
  Progress progress{false, 1000};
  TrainerOptions o;
  o.log_every = 1000;
  const TrainResult result = Trainer(c, facts, o, nullptr, progress).fit();
  EXPECT_EQ(result.skipped_steps, result.optimizer_steps);
  const auto masters = c.optimizer->parameters();
  for (std::size_t i = 0; i < masters.size(); ++i) EXPECT_TRUE(at::equal(masters[i], before[i])) << i;
  // Backed off once per skipped step from 1e30 (a float32 scale).
  EXPECT_EQ(c.precision->metrics().at(0).second,
            static_cast<double>(static_cast<float>(1.0e30) * std::pow(0.5f, static_cast<float>(result.skipped_steps))));
}

// bf16_true: the optimizer updates the bfloat16 model itself, and its state is bfloat16.
// That is the accuracy cost the docs state: an update below half a weight's bfloat16
// spacing is lost, where bf16_master's float32 masters keep it.
TEST(MasterWeights, Bf16TrueLosesUpdatesThatBf16MasterKeeps) {
  const std::string tiny_lr = "{name: sgd, lr: 1.0e-6}";
  RunFacts true_bf16_facts, master_facts;
  Components true_bf16 = build_with(true_bf16_facts, "{name: bf16_true}", plugins(),
                                    "{name: simple_cnn, channels: [4, 8], hidden: 16}", tiny_lr);
  const auto model = true_bf16.model->parameters(), updated = true_bf16.optimizer->parameters();
  ASSERT_EQ(model.size(), updated.size());
  for (std::size_t i = 0; i < model.size(); ++i) {
    EXPECT_TRUE(model[i].is_same(updated[i])) << "bf16_true has no masters: the optimizer updates the model";
    EXPECT_EQ(model[i].scalar_type(), at::kBFloat16);
  }
  std::vector<at::Tensor> before;
  for (const auto& p : model) before.push_back(p.clone());
  Components master = build_with(master_facts, "{name: bf16_master}", plugins(),
                                 "{name: simple_cnn, channels: [4, 8], hidden: 16}", tiny_lr);
  std::vector<at::Tensor> masters_before;
  for (const auto& m : master.optimizer->parameters()) masters_before.push_back(m.clone());

  Progress progress{false, 1000};
  TrainerOptions o;
  o.log_every = 1000;
  Trainer(true_bf16, true_bf16_facts, o, nullptr, progress).fit();
  Trainer(master, master_facts, o, nullptr, progress).fit();
  std::int64_t changed_true = 0, changed_master = 0;
  for (std::size_t i = 0; i < model.size(); ++i) changed_true += model[i].ne(before[i]).sum().item<std::int64_t>();
  const auto masters = master.optimizer->parameters();
  for (std::size_t i = 0; i < masters.size(); ++i) {
    changed_master += masters[i].ne(masters_before[i]).sum().item<std::int64_t>();
  }
  EXPECT_GT(changed_master, 0);
  EXPECT_LT(changed_true * 10, changed_master) << "bf16_true kept " << changed_true << " updates, bf16_master "
                                               << changed_master;
}

}  // namespace
}  // namespace mixt
