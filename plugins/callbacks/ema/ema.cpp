// callbacks/ema — an exponential moving average of the model's weights, timm's ModelEmaV3.
//
// timm/utils/model_ema.py ModelEmaV3 (timm 1.0): get_decay(step) and apply_update_, line by
// line: every floating-point tensor of the state dict (parameters and buffers) moves by
// lerp(ema, model, 1 - decay), one _foreach_lerp_ when both are on one device; integer
// buffers (BatchNorm's num_batches_tracked) are copied. `step` is the global optimizer step,
// as timm's train.py passes num_updates. Only applied steps update: a step the precision
// policy skipped left the weights as they were.
//
// The average is evaluated after the model's own weights each epoch (val_top1_ema), kept in
// checkpoints, and written by `mixt export --ema`. Data-parallel ranks hold identical weights
// after every step, so each rank's average is the same without communication. Under
// trainer.distributed.sharding: parameters each rank averages its chunks of the weights
// (mixt/weight_shards.h), 1/N of the average, and gathers it whole for each checkpoint and
// evaluation: the lerp is element-wise, so the chunks hold exactly what the whole would.
#include <ATen/ATen.h>
#include <mixt/callback.h>
#include <mixt/helpers/named_tensors_archive.h>
#include <mixt/helpers/nf4.h>
#include <mixt/helpers/state_dict.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/weight_shards.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace {

// The recipe's section; the defaults are timm ModelEmaV3's.
struct EmaOptions {
  double decay = 0.9999;
  double min_decay = 0.0;
  std::int64_t update_after_step = 0;
  bool warmup = false;
  double warmup_gamma = 1.0;
  double warmup_power = 2.0 / 3.0;
  std::int64_t every = 1;
  std::string device = "model";  // "model", or "cpu": the average kept off the accelerator
};

// timm ModelEmaV3.get_decay.
double decay_at(const EmaOptions& o, std::int64_t global_step) {
  const std::int64_t step = std::max<std::int64_t>(0, global_step - o.update_after_step - 1);
  if (step <= 0) return 0.0;
  if (!o.warmup) return o.decay;
  const double decay = 1.0 - std::pow(1.0 + static_cast<double>(step) / o.warmup_gamma, -o.warmup_power);
  return std::max(std::min(decay, o.decay), o.min_decay);
}

class Ema : public mixt::Callback, public mixt::GathersForCheckpoint {
 public:
  Ema(EmaOptions options, std::shared_ptr<mixt::Model> model, std::shared_ptr<const mixt::WeightShards> weights,
      int rank)
      : o_(std::move(options)),
        model_(std::move(model)),
        weights_(weights ? std::move(weights) : mixt::whole_weights(model_)),
        rank_(rank) {}

  // timm copies the model when the EMA is made: here when training starts (after the
  // weights a recipe or a resume loaded, and rank 0's broadcast), unless a checkpoint had one.
  void on_fit_start(const mixt::FitStart& /*fit*/) override {
    if (!average_.empty()) return;
    at::NoGradGuard no_grad;
    for (const auto& [name, tensor] : weights_->held()) average_.emplace_back(name, copy_for_average(tensor));
  }

  void on_epoch_start(const mixt::EpochStart& /*epoch*/) override { whole_.clear(); }

  void on_step_end(const mixt::StepEnd& step) override {
    // `every` first: whether the step was applied may be a host read (a device outcome).
    if (step.state.global_step % o_.every != 0 || !step.applied.applied()) return;
    update(1.0 - decay_at(o_, step.state.global_step));
  }

  // Sharded weights: every rank, before each checkpoint, so that rank 0's save() has it whole.
  void gather_for_checkpoint() override {
    if (weights_->sharded()) whole_ = weights_->gather(average_);
  }

  std::string evaluated_weights() const override { return "ema"; }

  void on_evaluation_start(const mixt::TrainState& /*state*/, const std::string& weights) override {
    if (weights != "ema") return;
    if (weights_->sharded() && whole_.empty()) whole_ = weights_->gather(average_);  // every rank evaluates
    const mixt::NamedTensors& average = weights_->sharded() ? whole_ : average_;
    at::NoGradGuard no_grad;
    live_.clear();
    evaluated_ = mixt::state_dict(*model_);  // whole while evaluated, under any sharding
    for (std::size_t i = 0; i < evaluated_.size(); ++i) {
      if (mixt::held_in_nf4(evaluated_[i].second)) {  // a frozen NF4 weight: its own average
        live_.emplace_back();
        continue;
      }
      live_.push_back(evaluated_[i].second.clone());
      evaluated_[i].second.copy_(average[i].second);
    }
  }

  void on_evaluation_end(const mixt::TrainState& /*state*/, const mixt::Evaluation& evaluation) override {
    if (evaluation.weights != "ema" || live_.empty()) return;
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < evaluated_.size(); ++i) {
      if (live_[i].defined()) evaluated_[i].second.copy_(live_[i]);
    }
    live_.clear();
    evaluated_.clear();
    if (rank_ != 0) whole_.clear();  // rank 0 may save the checkpoint again after on_epoch_end
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    if (weights_->sharded() && whole_.empty()) {
      throw std::logic_error("the EMA's chunks were not gathered before its checkpoint was written");
    }
    mixt::write_named_tensors(archive, weights_->sharded() ? whole_ : average_);
  }

  void load(torch::serialize::InputArchive& archive) override {
    mixt::NamedTensors saved = mixt::read_named_tensors(archive);
    if (saved.empty()) return;  // a checkpoint without an average: start one at fit start
    const mixt::NamedTensors model = mixt::state_dict(*model_);
    bool matches = saved.size() == model.size();
    for (std::size_t i = 0; matches && i < model.size(); ++i) {
      matches = saved[i].first == model[i].first && saved[i].second.sizes() == model[i].second.sizes();
    }
    if (!matches) {
      throw mixt::runtime_error("the checkpoint's EMA weights do not match the model's names and shapes",
                                "resume a checkpoint of this recipe, or remove the ema callback to start afresh");
    }
    const mixt::NamedTensors chunks = weights_->cut(saved);  // whatever world size wrote it
    const mixt::NamedTensors held = weights_->held();
    average_.clear();
    whole_.clear();
    for (std::size_t i = 0; i < held.size(); ++i) {
      at::Tensor average = copy_for_average(held[i].second);
      if (!mixt::held_in_nf4(held[i].second)) average.copy_(chunks[i].second);
      average_.emplace_back(held[i].first, average);
    }
  }

 private:
  at::Tensor copy_for_average(const at::Tensor& tensor) const {
    // A weight held in NF4 (adapter.quantize_base) is frozen and is no weight: the one
    // number itself, not a copy (a copy would be as large as the float weight).
    if (mixt::held_in_nf4(tensor)) return tensor.detach();
    return o_.device == "cpu" ? tensor.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true)
                              : tensor.detach().clone();
  }

  // timm ModelEmaV3.apply_update_ (foreach, or per tensor when the average is elsewhere).
  void update(double weight) {
    at::NoGradGuard no_grad;
    whole_.clear();
    const mixt::NamedTensors held = weights_->held();
    std::vector<at::Tensor> averages, values;
    for (std::size_t i = 0; i < held.size(); ++i) {
      const at::Tensor& average = average_[i].second;
      const at::Tensor& value = held[i].second;
      if (mixt::held_in_nf4(value)) continue;
      if (!average.is_floating_point()) {
        average.copy_(value);
      } else if (average.device() == value.device()) {
        averages.push_back(average);
        values.push_back(value);
      } else {
        average.lerp_(value.to(average.device()), weight);
      }
    }
    if (!averages.empty()) at::_foreach_lerp_(averages, values, weight);
  }

  EmaOptions o_;
  std::shared_ptr<mixt::Model> model_;
  std::shared_ptr<const mixt::WeightShards> weights_;
  int rank_;
  mixt::NamedTensors average_;    // in the model's state-dict order: whole, or this rank's chunks
  mixt::NamedTensors whole_;      // the chunks gathered, for a checkpoint and the evaluation
  mixt::NamedTensors evaluated_;  // the model's state dict while the average is evaluated
  std::vector<at::Tensor> live_;  // the model's own weights meanwhile
};

using O = EmaOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::decay, "decay", "the average's decay per update", mixt::between(0, 1))
        .add(&O::min_decay, "min_decay", "with warmup: the decay's lower bound", mixt::between(0, 1))
        .add(&O::update_after_step, "update_after_step",
             "optimizer steps before the average starts (it copies the weights until then)", mixt::at_least(0))
        .add(&O::warmup, "warmup", "decay 1 - (1 + step / warmup_gamma)^-warmup_power, capped at decay")
        .add(&O::warmup_gamma, "warmup_gamma", "the warm-up's step scale", mixt::above(0))
        .add(&O::warmup_power, "warmup_power", "the warm-up's power (3/4 for short runs, as timm suggests)",
             mixt::above(0))
        .add(&O::every, "every", "optimizer steps between updates", mixt::at_least(1))
        .add(&O::device, "device", "the model's device, or cpu (keeps accelerator memory free)",
             mixt::one_of({"model", "cpu"}));

std::unique_ptr<mixt::Callback> make_ema(const EmaOptions& o, const mixt::CallbackContext& context) {
  return std::make_unique<Ema>(o, context.model, context.weight_shards, context.rank);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_callback("ema", "exponential moving average of the weights (timm ModelEmaV3), evaluated as val_top1_ema",
                         kOptions, make_ema);
}

}  // namespace

MIXT_PLUGIN("ema", "1.0.0", register_components)
