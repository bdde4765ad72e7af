#include "distributed/gradient_buckets.h"

#include <map>
#include <utility>

namespace mixt::distributed {

GradientBuckets::GradientBuckets(const std::vector<at::Tensor>& parameters, std::int64_t bucket_bytes) {
  // Open bucket and its size, per (device, dtype).
  std::map<std::pair<std::string, int>, std::pair<std::size_t, std::int64_t>> open;
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    const at::Tensor& p = *it;
    if (!p.requires_grad()) continue;
    const auto key = std::make_pair(p.device().str(), static_cast<int>(p.scalar_type()));
    const std::int64_t bytes = p.numel() * static_cast<std::int64_t>(p.element_size());
    auto found = open.find(key);
    if (found == open.end() || (found->second.second > 0 && found->second.second + bytes > bucket_bytes)) {
      buckets_.emplace_back();
      found = open.insert_or_assign(key, std::make_pair(buckets_.size() - 1, std::int64_t{0})).first;
    }
    buckets_[found->second.first].push_back(p);
    found->second.second += bytes;
  }
}

void GradientBuckets::average(const ProcessGroupCommunicator& communicator) const {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> flats;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  flats.reserve(buckets_.size());
  works.reserve(buckets_.size());
  for (const auto& bucket : buckets_) {
    std::vector<at::Tensor> pieces;
    pieces.reserve(bucket.size());
    for (const at::Tensor& p : bucket) {
      const at::Tensor& grad = p.grad();
      pieces.push_back(grad.defined() ? grad.reshape({-1}) : at::zeros({p.numel()}, p.options()));
    }
    flats.push_back(at::cat(pieces));
    works.push_back(communicator.start_sum(flats.back()));
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    communicator.wait(works[b], "gradient all_reduce (bucket " + std::to_string(b) + ")");
    at::Tensor& flat = flats[b];
    flat.div_(communicator.world_size());
    std::int64_t offset = 0;
    for (const at::Tensor& p : buckets_[b]) {
      at::Tensor grad = p.grad();
      if (grad.defined()) grad.copy_(flat.narrow(0, offset, p.numel()).view_as(grad));
      offset += p.numel();
    }
  }
}

}  // namespace mixt::distributed
