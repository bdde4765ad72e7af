// my_master — a master-weight policy written outside the mixt tree that rounds the way the
// in-tree bf16_master does not: the model in bfloat16, the optimizer on float32 copies of the
// weights ("masters"), and after each step every master is rounded into the model
// *stochastically* (stochastic_rounding.h), so that the bfloat16 weights equal the masters on
// average instead of each update below half a bfloat16 gap rounding away. The bookkeeping is
// the SDK's mixt::MasterWeights (mixt/helpers/master_weights.h); docs/writing-a-policy.md walks
// through it.
//
// Reproducible and resumable bit for bit: the random bits of step n come from a generator
// seeded by (seed, n), so the checkpoint needs only the step count besides the masters (a
// generator's state would do too, but it is device-specific and 5 KB for the CPU's).
#include <ATen/CPUGeneratorImpl.h>
#include <mixt/helpers/master_weights.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <cstdint>

#include "stochastic_rounding.h"

namespace {

class MyMasterPolicy : public mixt::PrecisionPolicy {
 public:
  MyMasterPolicy(std::vector<std::string> fp32_modules, std::int64_t seed)
      : fp32_modules_(std::move(fp32_modules)), seed_(static_cast<std::uint64_t>(seed)) {}

  // Once, before the optimizer exists: the model to bfloat16, but the recipe's fp32_modules.
  void setup(torch::nn::Module& model, at::Device) override {
    mixt::cast_model(model, at::kBFloat16, [&](const std::string& parameter) {
      return mixt::lies_under(parameter, fp32_modules_);
    });
  }
  // The optimizer is built over these: float32 copies, by the model's parameter names.
  std::vector<std::pair<std::string, at::Tensor>> optimizer_parameters(torch::nn::Module& model) override {
    return masters_.make(model);
  }
  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kBFloat16);
  }
  // Before clipping: the model's gradients become the masters' (float32).
  void gradients_ready(mixt::Optimizer&) override { masters_.hand_gradients(); }

  // The optimizer updates the masters; the model gets their stochastic rounding.
  mixt::StepOutcome step(mixt::Optimizer& optimizer) override {
    optimizer.step();
    // A generator per step, seeded from (seed, step): a resume draws the same bits.
    const at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed_ + 0x9E3779B97F4A7C15ull * steps_);
    ++steps_;
    at::NoGradGuard no_grad;
    for (const mixt::MasterWeights::Pair& pair : masters_.pairs()) {
      if (pair.parameter.scalar_type() == at::kBFloat16) {
        const at::Tensor bits = my_master::random_rounding_bits(pair.master, generator);
        pair.parameter.copy_(my_master::stochastic_round_to_bf16(pair.master, bits));
      } else {
        pair.parameter.copy_(pair.master);  // an fp32_modules parameter: nothing to round
      }
      pair.master.mutable_grad() = at::Tensor();  // no float32 gradients through the next forward
    }
    return true;
  }

  // The masters are the real weights (`mixt export` writes them); the step count makes the
  // rounding of a resumed run the one it would have had without the interruption.
  void save(torch::serialize::OutputArchive& archive) const override {
    masters_.save(archive);
    archive.write("my_master.steps", c10::IValue(static_cast<std::int64_t>(steps_)));
  }
  void load(torch::serialize::InputArchive& archive) override {
    masters_.load(archive);
    c10::IValue steps;
    archive.read("my_master.steps", steps);
    steps_ = static_cast<std::uint64_t>(steps.toInt());
  }

 private:
  std::vector<std::string> fp32_modules_;
  std::uint64_t seed_;
  std::uint64_t steps_ = 0;
  mixt::MasterWeights masters_;
};

struct MyMasterOptions {
  std::int64_t seed = 0;
};
const auto kOptions = mixt::OptionsOf<MyMasterOptions>().add(
    &MyMasterOptions::seed, "seed", "seeds the stochastic rounding (step n draws from seed and n)");

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision(
      "my_master", "example: bfloat16 model, float32 master weights rounded into it stochastically (unbiased)",
      kOptions, [](const MyMasterOptions& o, const mixt::PrecisionContext& context) {
        return std::unique_ptr<mixt::PrecisionPolicy>(std::make_unique<MyMasterPolicy>(context.fp32_modules, o.seed));
      });
}

}  // namespace

MIXT_PLUGIN("my_master", "0.2.0", register_components)
