// How DDP groups tensors for its collectives, shared by the all-reduce buckets
// (gradient_buckets.h) and the shard buckets (shard_layout.h): in the order given, each
// tensor joins the open bucket of its device and dtype, and a bucket that would pass
// `bucket_bytes` is closed (a tensor larger than that gets a bucket of its own).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace mixt::distributed {

class BucketAssigner {
 public:
  explicit BucketAssigner(std::int64_t bucket_bytes) : bucket_bytes_(bucket_bytes) {}

  // The bucket (0, 1, ... in the order they open) of `bytes` of `tensor`'s device and dtype.
  std::size_t assign(const at::Tensor& tensor, std::int64_t bytes) {
    const auto key = std::make_pair(tensor.device().str(), static_cast<int>(tensor.scalar_type()));
    auto found = open_.find(key);
    if (found == open_.end() || (found->second.second > 0 && found->second.second + bytes > bucket_bytes_)) {
      found = open_.insert_or_assign(key, std::make_pair(count_++, std::int64_t{0})).first;
    }
    found->second.second += bytes;
    return found->second.first;
  }
  std::size_t count() const { return count_; }
  // The next tensor starts new buckets (sharding: parameters keeps each block's tensors in
  // buckets of their own, so that a block is done when its buckets are).
  void close_all() { open_.clear(); }

 private:
  std::int64_t bucket_bytes_;
  std::size_t count_ = 0;
  std::map<std::pair<std::string, int>, std::pair<std::size_t, std::int64_t>> open_;  // bucket, bytes in it
};

}  // namespace mixt::distributed
