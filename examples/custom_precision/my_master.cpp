// my_master — a master-weight policy written outside the mixt tree: the model in bfloat16
// (half the memory for weights, activations and gradients), the optimizer on float32
// copies of the weights, so that small updates accumulate instead of rounding away. Each
// method is one step of the precision contract (mixt/precision.h); the bookkeeping is the
// SDK's mixt::MasterWeights (mixt/helpers/master_weights.h). docs/precision.md walks
// through it; the in-tree bf16_master is the same policy.
#include <mixt/helpers/master_weights.h>
#include <mixt/plugin.h>

namespace {

class MyMasterPolicy : public mixt::PrecisionPolicy {
 public:
  explicit MyMasterPolicy(std::vector<std::string> fp32_modules) : fp32_modules_(std::move(fp32_modules)) {}

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
  // Under autocast, float32 modules and bfloat16 ones meet without casts by hand.
  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kBFloat16);
  }
  // After backward (and the ranks' average): the model's gradients become the masters',
  // so that clipping and the optimizer see float32 gradients.
  void gradients_ready(mixt::Optimizer&) override { masters_.hand_gradients(); }
  // The optimizer updates the masters; the model gets their rounding.
  mixt::StepOutcome step(mixt::Optimizer& optimizer) override {
    optimizer.step();
    masters_.round_into_model();
    return true;
  }
  // The masters are the real weights: checkpoints keep them, `mixt export` writes them.
  void save(torch::serialize::OutputArchive& archive) const override { masters_.save(archive); }
  void load(torch::serialize::InputArchive& archive) override { masters_.load(archive); }

 private:
  std::vector<std::string> fp32_modules_;
  mixt::MasterWeights masters_;
};

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("my_master", {"bfloat16 model, float32 master weights (an out-of-tree example)", {}},
                          [](const mixt::Config&, const mixt::PrecisionContext& context) {
                            return std::unique_ptr<mixt::PrecisionPolicy>(
                                std::make_unique<MyMasterPolicy>(context.fp32_modules));
                          });
}

}  // namespace

MIXT_PLUGIN("my_master", "0.1.0", register_components)
