#include "distributed/optimizer_resharding.h"

#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "common/optimizer_shards.h"
#include "distributed/shard_layout.h"
#include "mixt/error.h"

namespace mixt::distributed {

namespace {

std::int64_t numel_of(const std::vector<std::int64_t>& sizes) {
  std::int64_t numel = 1;
  for (const std::int64_t size : sizes) numel *= size;
  return numel;
}

// Over one rank a chunk is the whole tensor (the constructor refuses tensors without dimensions).
std::int64_t chunk_numel(const std::vector<std::int64_t>& sizes, int world) {
  return numel_of(chunk_shape(sizes, world));
}

// The parameter index of a key "state/<index>/<slot>".
std::optional<std::size_t> state_index(const std::string& key) {
  constexpr std::string_view prefix = "state/";
  if (key.rfind(prefix, 0) != 0) return std::nullopt;
  const std::size_t digits_end = key.find('/', prefix.size());
  if (digits_end == std::string::npos || digits_end == prefix.size() || digits_end + 1 == key.size()) {
    return std::nullopt;
  }
  std::size_t index = 0;
  for (std::size_t i = prefix.size(); i < digits_end; ++i) {
    if (key[i] < '0' || key[i] > '9') return std::nullopt;
    index = index * 10 + static_cast<std::size_t>(key[i] - '0');
  }
  return index;
}

bool same_tensor(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && at::equal(a, b.to(a.device()));
}

}  // namespace

std::optional<std::vector<OptimizedTensor>> in_optimizer_order(
    const std::vector<at::Tensor>& parameters, const std::vector<std::pair<std::string, at::Tensor>>& named) {
  std::unordered_map<const void*, const std::string*> name_of;
  for (const auto& [name, tensor] : named) name_of[tensor.unsafeGetTensorImpl()] = &name;
  std::vector<OptimizedTensor> order;
  for (const at::Tensor& parameter : parameters) {
    const auto found = name_of.find(parameter.unsafeGetTensorImpl());
    if (found == name_of.end()) return std::nullopt;
    order.push_back({*found->second, parameter.sizes().vec(), parameter.scalar_type()});
  }
  return order;
}

std::string describe_tensor(const std::string& name, at::IntArrayRef sizes, at::ScalarType dtype) {
  std::ostringstream line;
  line << name << " " << sizes << " " << c10::toString(dtype);
  return line.str();
}

std::string first_tensor_difference(const ShardManifest& saved, const std::vector<OptimizedTensor>& ours) {
  std::map<std::string, std::string> our_lines;
  for (const OptimizedTensor& tensor : ours) {
    our_lines[tensor.name] = describe_tensor(tensor.name, tensor.sizes, tensor.dtype);
  }
  for (const auto& [name, line] : our_lines) {
    const auto theirs = saved.tensors.find(name);
    if (theirs == saved.tensors.end()) return "the checkpoint has no '" + name + "', this run's '" + line + "'";
    if (theirs->second != line) return "the checkpoint's '" + theirs->second + "', this run's '" + line + "'";
  }
  for (const auto& [name, line] : saved.tensors) {
    if (our_lines.count(name) == 0) return "the checkpoint's '" + line + "', this run has no '" + name + "'";
  }
  return {};
}

OptimizerStateResharder::OptimizerStateResharder(std::vector<OptimizedTensor> order, int from_world, int rank,
                                                 int to_world)
    : order_(std::move(order)), from_world_(from_world), rank_(rank), to_world_(to_world) {
  for (const OptimizedTensor& tensor : order_) {
    // Its moments and its step counter would both have no dimension: which is which?
    if (tensor.sizes.empty()) {
      throw std::runtime_error("'" + tensor.name + "' has no dimension: its state cannot be told from a step counter");
    }
  }
}

const OptimizedTensor* OptimizerStateResharder::element_wise(const std::string& key, const at::Tensor& tensor) const {
  const std::optional<std::size_t> index = state_index(key);
  if (!index || *index >= order_.size()) return nullptr;
  const OptimizedTensor& parameter = order_[*index];
  return tensor.sizes().vec() == chunk_shape(parameter.sizes, from_world_) ? &parameter : nullptr;
}

void OptimizerStateResharder::copy_overlap(const OptimizedTensor& tensor, int from_rank, const at::Tensor& chunk,
                                           at::Tensor& into) const {
  const std::int64_t numel = numel_of(tensor.sizes);
  const std::int64_t old_chunk = chunk_numel(tensor.sizes, from_world_);
  const std::int64_t new_chunk = chunk_numel(tensor.sizes, to_world_);
  const std::int64_t old_start = from_rank * old_chunk, new_start = rank_ * new_chunk;
  const std::int64_t begin = std::max(old_start, new_start);
  const std::int64_t end = std::min({old_start + old_chunk, new_start + new_chunk, numel});
  if (begin >= end) return;
  into.view({-1})
      .narrow(0, begin - new_start, end - begin)
      .copy_(chunk.reshape({-1}).narrow(0, begin - old_start, end - begin));
}

void OptimizerStateResharder::add(int from_rank, torch::serialize::InputArchive& archive) {
  if (from_rank != added_) throw std::logic_error("optimizer shards added out of order");
  ++added_;
  const std::string whose = from_world_ == 1 ? "the whole state" : "rank " + std::to_string(from_rank) + "'s state";
  for (const std::string& key : archive.keys()) {
    at::Tensor tensor;
    if (!archive.try_read(key, tensor)) {
      torch::serialize::InputArchive nested;
      if (archive.try_read(key, nested)) throw std::runtime_error("'" + key + "' in " + whose + " is not a tensor");
      c10::IValue value;
      archive.read(key, value);
      if (from_rank == 0) values_[key] = value;
      continue;
    }
    if (const OptimizedTensor* parameter = element_wise(key, tensor)) {
      auto [into, fresh] = resharded_.try_emplace(key);
      if (fresh && from_rank > 0) throw std::runtime_error("'" + key + "' is in " + whose + " but not rank 0's");
      if (fresh) into->second = at::zeros(chunk_shape(parameter->sizes, to_world_), tensor.options());
      copy_overlap(*parameter, from_rank, tensor, into->second);
      continue;
    }
    if (from_rank == 0) {
      shared_[key] = tensor;
      continue;
    }
    const auto first = shared_.find(key);
    if (first == shared_.end() || !same_tensor(first->second, tensor)) {
      throw std::runtime_error("'" + key + "' differs between rank 0's state and rank " + std::to_string(from_rank) +
                               "'s, and is not a parameter's element-wise state (state/<index>/<slot>, of its "
                               "shard's shape)");
    }
  }
}

torch::serialize::InputArchive OptimizerStateResharder::result() {
  if (added_ != from_world_) throw std::logic_error("optimizer state resharded before every rank's was added");
  torch::serialize::OutputArchive out;
  for (const auto& [key, tensor] : resharded_) out.write(key, tensor, /*is_buffer=*/true);
  for (const auto& [key, tensor] : shared_) out.write(key, tensor, /*is_buffer=*/true);
  for (const auto& [key, value] : values_) out.write(key, value);
  std::stringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  return in;
}

void read_optimizer_shard(const std::filesystem::path& checkpoint, int rank, int world_size,
                          torch::serialize::InputArchive& into) {
  const std::filesystem::path shard = optimizer_shard_file(checkpoint, rank, world_size);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(shard, ec)) {
    throw Error(ErrorKind::recipe,
                "the checkpoint " + checkpoint.string() + " has no optimizer shard for rank " + std::to_string(rank) +
                    " of " + std::to_string(world_size) + " (" + shard.filename().string() + ")",
                {}, "trainer.resume",
                "keep the " + std::to_string(world_size) + " files " + checkpoint.filename().string() +
                    ".optimizer-<rank>-of-" + std::to_string(world_size) + " beside the checkpoint");
  }
  try {
    into.load_from(shard.string(), at::Device(at::kCPU));
  } catch (const c10::Error& error) {
    throw runtime_error("cannot read the optimizer shard " + shard.string() + ": " + error.what_without_backtrace());
  }
}

namespace {
Error cannot_reshard(const std::string& what, int from_world, int to_world, const std::string& why) {
  const auto ranks = [](int world) {
    return world == 1 ? std::string("one process") : std::to_string(world) + " ranks";
  };
  return Error(ErrorKind::recipe,
               "cannot reshard " + what + " from " + ranks(from_world) + " to " + ranks(to_world) + ": " + why, {},
               "trainer.resume",
               "resume on " + ranks(from_world) +
                   ", as the run that wrote it; or mixt export the weights and start "
                   "from them (model.weights) with a fresh optimizer");
}
}  // namespace

torch::serialize::InputArchive reshard_saved_state(const std::filesystem::path& checkpoint, int from_world,
                                                   std::vector<OptimizedTensor> order, int rank, int to_world) {
  const std::string what = "the optimizer state of " + checkpoint.string();
  try {
    OptimizerStateResharder resharder(std::move(order), from_world, rank, to_world);
    for (int from_rank = 0; from_rank < from_world; ++from_rank) {
      torch::serialize::InputArchive archive;
      read_optimizer_shard(checkpoint, from_rank, from_world, archive);
      resharder.add(from_rank, archive);
    }
    return resharder.result();
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const Error*>(&e) != nullptr) throw;
    throw cannot_reshard(what, from_world, to_world, e.what());
  }
}

torch::serialize::InputArchive reshard_whole_state(torch::serialize::InputArchive& whole,
                                                   std::vector<OptimizedTensor> order, int rank, int to_world) {
  try {
    OptimizerStateResharder resharder(std::move(order), 1, rank, to_world);
    resharder.add(0, whole);
    return resharder.result();
  } catch (const std::runtime_error& e) {
    throw cannot_reshard("the checkpoint's whole optimizer state", 1, to_world, e.what());
  }
}

}  // namespace mixt::distributed
