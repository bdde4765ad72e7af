// precision/bf16_master — a bfloat16 model with float32 master weights, no loss scaling.
//
// The model's floating-point parameters and buffers are cast to bfloat16 (except the
// submodules of precision.fp32_modules), so its weights, activations and gradients take half
// the memory; the optimizer updates float32 masters (its state is float32 too), and after
// each step the masters are rounded into the model. Updates far below a weight's bfloat16
// resolution therefore accumulate instead of vanishing. The forward pass runs under
// autocast(bfloat16), so float32 modules and reduced-precision ones meet without casts.
// bfloat16 has float32's exponent range: no loss scaler, no skipped step.
#include <mixt/helpers/named_tensors_archive.h>
#include <mixt/plugin.h>

#include <string>
#include <vector>

namespace {

// Whether `name` ("layer4.0.conv1.weight") lies under one of the listed submodules.
bool under(const std::string& name, const std::vector<std::string>& modules) {
  for (const std::string& module : modules) {
    if (name.rfind(module + ".", 0) == 0) return true;
  }
  return false;
}

class Bf16MasterPolicy : public mixt::PrecisionPolicy {
 public:
  explicit Bf16MasterPolicy(std::vector<std::string> fp32_modules) : fp32_modules_(std::move(fp32_modules)) {}

  void setup(torch::nn::Module& model, at::Device /*device*/) override {
    at::NoGradGuard no_grad;
    for (const auto& item : model.named_parameters(/*recurse=*/true)) cast(item.key(), item.value());
    for (const auto& item : model.named_buffers(/*recurse=*/true)) cast(item.key(), item.value());
  }

  std::vector<std::pair<std::string, at::Tensor>> optimizer_parameters(torch::nn::Module& model) override {
    std::vector<std::pair<std::string, at::Tensor>> masters;
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
      if (!item.value().requires_grad()) continue;
      const at::Tensor master = item.value().detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      pairs_.push_back({item.key(), item.value(), master});
      masters.emplace_back(item.key(), master);
    }
    return masters;
  }

  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kBFloat16);
  }

  // The model's gradients, in float32, become the masters' (the optimizer's). The model's
  // own are dropped: the optimizer's zero_grad() reaches only the masters, and the next
  // backward must not add to these.
  void gradients_ready(mixt::Optimizer& /*optimizer*/) override {
    at::NoGradGuard no_grad;
    for (auto& [name, parameter, master] : pairs_) {
      const at::Tensor gradient = parameter.grad();
      if (!gradient.defined()) {
        master.mutable_grad() = at::Tensor();
      } else if (!master.grad().defined()) {
        master.mutable_grad() = gradient.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      } else {
        master.mutable_grad().copy_(gradient);
      }
      parameter.mutable_grad() = at::Tensor();
    }
  }

  mixt::StepOutcome step(mixt::Optimizer& optimizer) override {
    optimizer.step();
    at::NoGradGuard no_grad;
    for (auto& pair : pairs_) pair.parameter.copy_(pair.master);  // rounded to the model's dtype
    return true;
  }

  // The masters are the real weights: checkpoints keep them (a resume continues them bit for
  // bit) and `mixt export` writes them.
  void save(torch::serialize::OutputArchive& archive) const override {
    mixt::NamedTensors masters;
    for (const Pair& pair : pairs_) masters.emplace_back(pair.name, pair.master);
    torch::serialize::OutputArchive nested;
    mixt::write_named_tensors(nested, masters);
    archive.write("master_weights", nested);
  }

  void load(torch::serialize::InputArchive& archive) override {
    torch::serialize::InputArchive nested;
    if (!archive.try_read("master_weights", nested)) {
      throw mixt::runtime_error("the checkpoint holds no master weights: another precision policy wrote it",
                                "resume it with the policy it was written with");
    }
    const mixt::NamedTensors saved = mixt::read_named_tensors(nested);
    if (saved.size() != pairs_.size()) {
      throw mixt::runtime_error("the checkpoint's master weights do not match the model's parameters");
    }
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < saved.size(); ++i) {
      if (saved[i].first != pairs_[i].name || saved[i].second.sizes() != pairs_[i].master.sizes()) {
        throw mixt::runtime_error("the checkpoint's master weight " + saved[i].first + " is not the model's " +
                                  pairs_[i].name);
      }
      pairs_[i].master.copy_(saved[i].second);
    }
  }

 private:
  struct Pair {
    std::string name;
    at::Tensor parameter;  // the model's, bfloat16 (float32 in an fp32 module)
    at::Tensor master;     // float32, what the optimizer updates
  };

  void cast(const std::string& name, const at::Tensor& tensor) const {
    if (tensor.is_floating_point() && !under(name, fp32_modules_)) tensor.set_data(tensor.data().to(at::kBFloat16));
  }

  std::vector<std::string> fp32_modules_;
  std::vector<Pair> pairs_;
};

std::unique_ptr<mixt::PrecisionPolicy> make_bf16_master(const mixt::Config&, const mixt::PrecisionContext& context) {
  return std::make_unique<Bf16MasterPolicy>(context.fp32_modules);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("bf16_master",
                          {"bfloat16 model, float32 master weights in the optimizer, autocast(bfloat16), no scaler",
                           {}},
                          make_bf16_master);
}

}  // namespace

MIXT_PLUGIN("bf16_master", "1.0.0", register_components)
