#include "train/gradient_norm.h"

#include <utility>

namespace mixt {

namespace {
// The gradients grouped by (device, dtype) in first-seen order, as PyTorch's
// _group_tensors_by_device_and_dtype does: the norms are stacked in that order.
std::vector<std::vector<at::Tensor>> gradients_by_device_and_dtype(const std::vector<at::Tensor>& parameters) {
  std::vector<std::pair<std::pair<at::Device, at::ScalarType>, std::vector<at::Tensor>>> groups;
  for (const at::Tensor& parameter : parameters) {
    const at::Tensor& grad = parameter.grad();
    if (!grad.defined()) continue;
    const std::pair<at::Device, at::ScalarType> key{grad.device(), grad.scalar_type()};
    auto group = groups.begin();
    while (group != groups.end() && group->first != key) ++group;
    if (group == groups.end()) group = groups.insert(groups.end(), {key, {}});
    group->second.push_back(grad);
  }
  std::vector<std::vector<at::Tensor>> grads;
  for (auto& group : groups) grads.push_back(std::move(group.second));
  return grads;
}
}  // namespace

at::Tensor gradient_norm(const std::vector<at::Tensor>& parameters) {
  const at::NoGradGuard no_grad;
  const auto groups = gradients_by_device_and_dtype(parameters);
  if (groups.empty()) return {};
  const at::Device first_device = groups.front().front().device();
  std::vector<at::Tensor> norms;
  for (const auto& grads : groups) {
    for (const at::Tensor& norm : at::_foreach_norm(grads, 2)) norms.push_back(norm.to(first_device));
  }
  return at::linalg_vector_norm(at::stack(norms), 2);
}

void clip_gradients(const std::vector<at::Tensor>& parameters, const at::Tensor& total_norm, double max_norm) {
  const at::NoGradGuard no_grad;
  // Python's `max_norm / tensor` is reciprocal() * max_norm: the same rounding here.
  const at::Tensor coefficient = at::clamp(at::reciprocal(total_norm + 1e-6) * max_norm, std::nullopt, 1.0);
  for (const auto& grads : gradients_by_device_and_dtype(parameters)) {
    at::_foreach_mul_(grads, coefficient.to(grads.front().device()));
  }
}

}  // namespace mixt
