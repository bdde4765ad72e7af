// StepEnd::grad_norm, the gradient norm callbacks and metrics.jsonl see: for fp32, amp_fp16
// (unscaled) and bf16_master (the float32 masters' gradients), with and without clipping,
// equal to what torch.nn.utils.clip_grad_norm_ returns when PyTorch replays the same run
// (tests/support/grad_norm_reference.py, run here: same initial weights, same batches, same
// SGD). Then where it is defined, and that metrics.jsonl logs it.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "blob_training.h"
#include "common/run_directory.h"
#include "test_support.h"
#include "train/gradient_norm.h"
#include "train/trainer.h"

namespace mixt {
namespace {

nlohmann::json values_of(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.detach().to(at::kDouble).contiguous().view(-1);
  const std::vector<double> values(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  nlohmann::json rows = values;
  if (tensor.dim() == 2) {
    rows = nlohmann::json::array();
    for (std::int64_t r = 0; r < tensor.size(0); ++r) {
      rows.push_back(std::vector<double>(values.begin() + r * tensor.size(1), values.begin() + (r + 1) * tensor.size(1)));
    }
  }
  return rows;
}

// The blobs, remembering each batch served: what the reference replays.
class RecordingBlobs : public testing::BlobDataset {
 public:
  RecordingBlobs() : BlobDataset(5) {}
  std::optional<Batch> next_batch() override {
    std::optional<Batch> batch = BlobDataset::next_batch();
    if (batch) served.push_back({{"inputs", values_of(batch->inputs)}, {"targets", values_of(batch->targets)}});
    return batch;
  }
  nlohmann::json served = nlohmann::json::array();
};

struct SeenStep {
  bool defined = false;
  double norm = NAN;
  bool logged = false;
};

class NormRecorder : public Callback {
 public:
  NormRecorder(std::vector<SeenStep>& seen, bool asks) : seen_(seen), asks_(asks) {}
  bool reads_grad_norm_every_step() const override { return asks_; }
  void on_step_end(const StepEnd& step) override {
    seen_.push_back({step.grad_norm.defined(), step.grad_norm.defined() ? step.grad_norm.item<double>() : NAN,
                     step.logged});
  }

 private:
  std::vector<SeenStep>& seen_;
  bool asks_;
};

struct TrainedRun {
  nlohmann::json record;  // what the reference replays
  std::vector<SeenStep> seen;
};

// Five steps of `policy` on the blobs, as the assembly builds a run: the policy set up on
// the model, the optimizer over its optimizer_parameters.
// `callback_asks`: the recording callback asks for the norm on every step itself.
TrainedRun train(const std::string& policy, double clip, const std::string& grad_norm, std::int64_t log_every = 1000,
          RunDirectory* run_directory = nullptr, bool callback_asks = false) {
  at::set_num_threads(1);
  testing::Fixture f;
  auto blobs = std::make_unique<RecordingBlobs>();
  RecordingBlobs& recorded = *blobs;
  f.components.train = std::move(blobs);
  f.components.val.reset();
  TrainedRun run;
  run.record["policy"] = policy;
  run.record["clip"] = clip;
  for (const auto& p : f.components.model->named_parameters()) run.record["initial"][p.key()] = values_of(p.value());
  const RecipeNodePtr root = parse_yaml("precision: {name: " + policy + "}", "test");
  f.components.precision = f.plugins.registry.make_precision(Config(root, "").section("precision"), {});
  f.components.precision->setup(*f.components.model, at::kCPU);
  OptimizerContext context;
  context.named_parameters = f.components.precision->optimizer_parameters(*f.components.model);
  f.components.optimizer = f.plugins.registry.make_optimizer(Config(f.root, "").section("optimizer"), context);
  TrainerOptions o = testing::options(1);
  o.max_steps_per_epoch = 5;
  o.log_every = log_every;
  o.clip_grad_norm = clip;
  o.grad_norm = grad_norm;
  Trainer trainer(f.components, f.facts, o, run_directory, f.progress);
  trainer.add_callback(std::make_shared<NormRecorder>(run.seen, callback_asks), "norms");
  trainer.fit();
  run.record["batches"] = recorded.served;
  return run;
}

std::vector<double> reference_norms(const nlohmann::json& record) {
  testing::TempDir dir;
  const fs::path input = dir.write("run.json", record.dump()), output = dir.path() / "result.json";
  const testing::CommandResult result = testing::run_command(
      testing::shell_quote(MIXT_PYTHON) + " " +
      testing::shell_quote((testing::source_dir() / "tests/support/grad_norm_reference.py").string()) + " " +
      testing::shell_quote(input.string()) + " " + testing::shell_quote(output.string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  if (result.exit_code != 0) return {};
  return nlohmann::json::parse(testing::read_file(output)).at("norms").get<std::vector<double>>();
}

// Bit for bit: the same ATen kernels in the same order (foreach norms, their stack's norm).
void expect_norms_equal_torch(const std::string& policy, double clip) {
  SCOPED_TRACE(policy + (clip > 0 ? ", clipped" : ""));
  const TrainedRun run = train(policy, clip, "every_step");
  const std::vector<double> expected = reference_norms(run.record);
  ASSERT_EQ(run.seen.size(), 5U);
  ASSERT_EQ(expected.size(), run.seen.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(run.seen[i].defined) << "step " << i + 1;
    EXPECT_EQ(run.seen[i].norm, expected[i]) << "step " << i + 1;
  }
  if (clip > 0) {  // clipping bites: the later steps then depend on it being right
    EXPECT_GT(expected.front(), clip);
  }
}

TEST(GradientNorm, Fp32EqualsTorchClipGradNorm) {
  expect_norms_equal_torch("fp32", 0);
  expect_norms_equal_torch("fp32", 0.5);
}

TEST(GradientNorm, AmpFp16IsTheUnscaledNormTorchClipGradNormReturns) {
  expect_norms_equal_torch("amp_fp16", 0);
  expect_norms_equal_torch("amp_fp16", 0.5);
}

TEST(GradientNorm, Bf16MasterIsTheMastersNormTorchClipGradNormReturns) {
  expect_norms_equal_torch("bf16_master", 0);
  expect_norms_equal_torch("bf16_master", 0.5);
}

// Measured on logged steps (the log reads it) and, when clipping, on every step; otherwise
// not at all, so an unlogged step costs nothing more.
TEST(GradientNorm, IsDefinedOnLoggedStepsAndEveryStepWhenClippingOrAsked) {
  const auto defined_at = [](const TrainedRun& run) {
    std::vector<bool> defined;
    for (const SeenStep& step : run.seen) defined.push_back(step.defined);
    return defined;
  };
  EXPECT_EQ(defined_at(train("fp32", 0, "logged", 2)), (std::vector<bool>{false, true, false, true, false}));
  EXPECT_EQ(defined_at(train("fp32", 1.0, "logged", 2)), std::vector<bool>(5, true));
  EXPECT_EQ(defined_at(train("fp32", 0, "every_step", 2)), std::vector<bool>(5, true));
  EXPECT_EQ(defined_at(train("fp32", 0, "logged", 2, nullptr, /*callback_asks=*/true)), std::vector<bool>(5, true));
}

TEST(GradientNorm, MetricsJsonlLogsItOnLoggedSteps) {
  testing::TempDir dir;
  RunDirectory run_directory(dir.path(), "norms");
  const TrainedRun run = train("fp32", 0, "logged", 2, &run_directory);
  std::vector<double> logged;
  std::istringstream lines(testing::read_file(run_directory.path() / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event.at("event") == "step") logged.push_back(event.at("grad_norm").get<double>());
  }
  ASSERT_EQ(logged.size(), 2U);
  EXPECT_EQ(logged[0], run.seen[1].norm);
  EXPECT_EQ(logged[1], run.seen[3].norm);
}

// The norm PyTorch computes from hand-made gradients: sqrt(3^2 + 4^2 + 12^2) = 13 over
// two tensors, and clipping to 6.5 halves each gradient (less the 1e-6 in the divisor).
TEST(GradientNorm, OfHandMadeGradientsAndClippingByIt) {
  at::Tensor a = at::zeros({2}).set_requires_grad(true), b = at::zeros({1}).set_requires_grad(true);
  a.mutable_grad() = at::tensor({3.0F, 4.0F});
  b.mutable_grad() = at::tensor({12.0F});
  const at::Tensor norm = gradient_norm({a, b});
  EXPECT_EQ(norm.item<float>(), 13.0F);
  clip_gradients({a, b}, norm, 6.5);
  EXPECT_NEAR(a.grad()[0].item<float>(), 1.5F, 1e-6);
  EXPECT_NEAR(b.grad()[0].item<float>(), 6.0F, 1e-6);
  EXPECT_FALSE(gradient_norm({at::zeros({1})}).defined()) << "no gradient: no norm";
}

}  // namespace
}  // namespace mixt
