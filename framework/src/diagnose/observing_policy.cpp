#include "diagnose/observing_policy.h"

namespace mixt::diagnose {

ObservingPolicy::ObservingPolicy(std::unique_ptr<PrecisionPolicy> policy, std::vector<std::string> parameter_names,
                                 Observations& into, ModuleWatch& modules)
    : policy_(std::move(policy)), parameter_names_(std::move(parameter_names)), into_(into), modules_(modules) {
  for (const std::string& name : parameter_names_) into_.parameters.emplace_back(name, UnderflowCounts{});
}

void ObservingPolicy::begin_step(std::int64_t step, bool logged) {
  current_ = StepRecord{step};
  loss_sum_ = at::Tensor();
  unscaled_ = false;
  modules_.begin_step(step);
  policy_->begin_step(step, logged);
}

void ObservingPolicy::backward(const at::Tensor& loss) {
  loss_sum_ = loss_sum_.defined() ? loss_sum_ + loss.detach() : loss.detach();
  policy_->backward(loss);
}

void ObservingPolicy::unscale(Optimizer& optimizer) {
  policy_->unscale(optimizer);
  unscaled_ = true;
}

// The scale this step's backward used: read before step() and update() change it.
double ObservingPolicy::loss_scale() const {
  for (const auto& [name, value] : policy_->metrics()) {
    if (name == "loss_scale") return value;
  }
  return 1;
}

StepOutcome ObservingPolicy::step(Optimizer& optimizer) {
  current_.loss_scale = loss_scale();
  if (!unscaled_) unscale(optimizer);
  const std::vector<at::Tensor> parameters = optimizer.parameters();
  for (std::size_t i = 0; i < parameters.size() && i < into_.parameters.size(); ++i) {
    into_.parameters[i].second.add(count_flushed_in_float16(parameters[i].grad(), current_.loss_scale));
  }
  const StepOutcome outcome = policy_->step(optimizer);
  current_.applied = outcome.applied();  // a read for a device outcome: diagnose syncs every step anyway
  // The trainer divides by `accumulate` before backward: the sum is the step's mean loss.
  current_.loss = loss_sum_.defined() ? loss_sum_.item<double>() : 0.0;
  into_.steps.push_back(current_);
  return outcome;
}

}  // namespace mixt::diagnose
