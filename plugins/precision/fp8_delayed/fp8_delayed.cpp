// precision/fp8_delayed — Transformer Engine's delayed scaling (its DelayedScaling recipe,
// format HYBRID: e4m3 forward, e5m2 output gradient) on the float8 linear layers of
// mixt/helpers/float8.h, the rest as bf16_master. Each float8 layer keeps an amax history
// per tensor (input, weight, output gradient): a training forward (and its backward) raises
// slot 0 to the tensor's max |x|; after each optimizer step, amax is the history's max
// (amax_compute: max) or slot 0 (most_recent), the history rolls by one and slot 0 is
// zeroed, and scale = (fp8_max / amax) / 2^margin where amax is positive and finite (else the
// scale stays). The casts of a step use the scales of the steps before it; they start at 1.
// In a data-parallel run slot 0 is all-reduced (max) before the update, so every rank casts
// alike. Histories and scales are checkpointed with the masters.
#include <ATen/autocast_mode.h>
#include <mixt/helpers/float8.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../common/bf16_master_policy.h"
#include "../common/float8_layers.h"

namespace {

enum class AmaxCompute { max, most_recent };

struct Fp8DelayedOptions {
  mixt::precision::Float8LayerOptions layers;
  std::int64_t amax_history_len = 1024;
  AmaxCompute amax_compute = AmaxCompute::max;
  std::int64_t margin = 0;
};

using O = Fp8DelayedOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .include(&O::layers, mixt::precision::kFloat8LayerOptions)
        .add(&O::amax_history_len, "amax_history_len", "steps of amax history per tensor", mixt::at_least(1))
        .choice(&O::amax_compute, "amax_compute",
                {{"max", AmaxCompute::max}, {"most_recent", AmaxCompute::most_recent}},
                "the amax a scale comes from: the history's max, or the last step's")
        .add(&O::margin, "margin", "`scale = (fp8_max / amax) / 2^margin`", mixt::at_least(0));

class DelayedScalingLinear : public mixt::LinearFunction {
 public:
  explicit DelayedScalingLinear(std::int64_t history_len)
      : history_(at::zeros({3, history_len})), scales_(at::ones({3})) {}

  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    at::Tensor x = input;
    const at::DeviceType device = x.device().type();
    if (at::autocast::is_autocast_enabled(device)) x = x.to(at::autocast::get_autocast_dtype(device));
    if (history_.device() != x.device()) {
      history_ = history_.to(x.device());
      scales_ = scales_.to(x.device());
    }
    mixt::Float8LinearScales scales{scales_.select(0, 0), scales_.select(0, 1), scales_.select(0, 2), {}};
    if (at::GradMode::is_enabled()) {  // training: this step's amaxes go into slot 0
      at::NoGradGuard no_grad;
      raise(0, x);
      raise(1, weight);
      scales.grad_output_amax = history_.select(0, 2).select(0, 0);
    }
    return mixt::float8_linear(x, weight, bias, scales);
  }

  at::Tensor& history() { return history_; }
  at::Tensor& scales() { return scales_; }

  void update(bool most_recent, std::int64_t margin) {
    at::NoGradGuard no_grad;
    const at::Tensor amax = most_recent ? history_.select(1, 0).clone() : std::get<0>(history_.max(1));
    history_.copy_(at::roll(history_, {-1}, {1}));
    history_.select(1, 0).fill_(0.0);
    const at::Tensor fp8_max = at::tensor({448.0f, 448.0f, 57344.0f}, history_.options());
    const at::Tensor fresh = (amax.reciprocal() * fp8_max) / std::pow(2.0, static_cast<double>(margin));
    scales_.copy_(at::where(amax.gt(0.0).logical_and(at::isfinite(amax)), fresh, scales_));
  }

 private:
  void raise(std::int64_t row, const at::Tensor& t) {
    at::Tensor slot = history_.select(0, row).select(0, 0);
    slot.copy_(at::maximum(slot, at::max(at::abs(t)).to(at::kFloat)));
  }
  at::Tensor history_, scales_;
};

class Fp8DelayedPolicy : public mixt::precision::Bf16MasterPolicy {
 public:
  Fp8DelayedPolicy(mixt::precision::Float8LayerOptions layers, std::int64_t history_len, bool most_recent,
                   std::int64_t margin, const mixt::Communicator* communicator)
      : Bf16MasterPolicy(layers.fp32_modules),
        layers_(std::move(layers)),
        history_len_(history_len),
        most_recent_(most_recent),
        margin_(margin),
        communicator_(communicator) {}

  void setup(torch::nn::Module& model, at::Device device) override {
    Bf16MasterPolicy::setup(model, device);
    const mixt::precision::Float8Layers chosen = mixt::precision::choose_float8_layers(model, layers_);
    for (const mixt::LinearLayer& layer : chosen.float8) {
      functions_.push_back(std::make_shared<DelayedScalingLinear>(history_len_));
      layer.set_function(functions_.back());
    }
    mixt::precision::warn_misaligned("fp8_delayed", chosen);
  }
  void update() override {
    if (functions_.empty()) return;
    if (communicator_ && communicator_->world_size() > 1) {  // every rank: the same amaxes, the same scales
      std::vector<at::Tensor> slots;
      for (const auto& f : functions_) slots.push_back(f->history().select(1, 0));
      at::Tensor all = at::stack(slots);
      communicator_->all_reduce(all, mixt::ReduceOp::max);
      for (std::size_t i = 0; i < functions_.size(); ++i) slots[i].copy_(all[static_cast<std::int64_t>(i)]);
    }
    for (const auto& f : functions_) f->update(most_recent_, margin_);
  }
  void save(torch::serialize::OutputArchive& archive) const override {
    Bf16MasterPolicy::save(archive);
    if (functions_.empty()) return;
    std::vector<at::Tensor> histories, scales;
    for (const auto& f : functions_) {
      histories.push_back(f->history().cpu());
      scales.push_back(f->scales().cpu());
    }
    archive.write("fp8_amax_history", at::stack(histories));
    archive.write("fp8_scales", at::stack(scales));
  }
  void load(torch::serialize::InputArchive& archive) override {
    Bf16MasterPolicy::load(archive);
    if (functions_.empty()) return;
    at::Tensor histories, scales;
    archive.read("fp8_amax_history", histories);
    archive.read("fp8_scales", scales);
    if (histories.size(0) != static_cast<std::int64_t>(functions_.size()) || histories.size(2) != history_len_) {
      throw mixt::recipe_error("the checkpoint's fp8_delayed state is for " + std::to_string(histories.size(0)) +
                                   " float8 layers with amax_history_len " + std::to_string(histories.size(2)) +
                                   ", this run has " + std::to_string(functions_.size()) + " with " +
                                   std::to_string(history_len_),
                               {}, "precision.amax_history_len");
    }
    for (std::size_t i = 0; i < functions_.size(); ++i) {
      const auto row = static_cast<std::int64_t>(i);
      functions_[i]->history().copy_(histories[row]);
      functions_[i]->scales().copy_(scales[row]);
    }
  }

 private:
  mixt::precision::Float8LayerOptions layers_;
  std::int64_t history_len_;
  bool most_recent_;
  std::int64_t margin_;
  const mixt::Communicator* communicator_;
  std::vector<std::shared_ptr<DelayedScalingLinear>> functions_;
};

std::unique_ptr<mixt::PrecisionPolicy> make_fp8_delayed(const Fp8DelayedOptions& o,
                                                        const mixt::PrecisionContext& context) {
  return std::make_unique<Fp8DelayedPolicy>(mixt::precision::with_fp32_modules(o.layers, context.fp32_modules),
                                            o.amax_history_len, o.amax_compute == AmaxCompute::most_recent, o.margin,
                                            context.communicator);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("fp8_delayed",
                          "Transformer Engine's delayed scaling: linear layers in float8 with scales from an amax "
                          "history (e4m3 forward, e5m2 output gradient), the rest as bf16_master",
                          kOptions, make_fp8_delayed);
}

}  // namespace

MIXT_PLUGIN("fp8_delayed", "1.0.0", register_components)
