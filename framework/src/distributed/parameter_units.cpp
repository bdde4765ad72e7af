#include "distributed/parameter_units.h"

#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "mixt/error.h"

namespace mixt::distributed {

namespace {

bool under(const std::string& name, const std::string& block) {
  return name.size() > block.size() && name.compare(0, block.size(), block) == 0 && name[block.size()] == '.';
}

// Whether `tensor` is the only tensor on its storage, all of it: what releasing can free.
bool owns_its_storage(const at::Tensor& tensor) {
  return tensor.storage_offset() == 0 &&
         tensor.storage().nbytes() == static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
}

void release_storage(const at::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
}

void allocate_storage(const at::Tensor& tensor, std::size_t bytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  c10::Allocator* allocator = storage->allocator() ? storage->allocator() : c10::GetAllocator(tensor.device().type());
  storage->set_data_ptr_noswap(allocator->allocate(bytes));
  storage->set_nbytes(bytes);
}

}  // namespace

std::vector<int> unit_of_each(const std::vector<std::pair<std::string, at::Tensor>>& full,
                              const torch::nn::Module& model, const std::vector<std::string>& blocks) {
  std::map<const c10::TensorImpl*, std::vector<std::string>> names;
  for (const auto& parameter : model.named_parameters(/*recurse=*/true)) {
    names[parameter.value().unsafeGetTensorImpl()].push_back(parameter.key());
  }
  std::map<const c10::StorageImpl*, int> tensors_on;
  for (const auto& [name, tensor] : full) ++tensors_on[tensor.storage().unsafeGetStorageImpl()];
  std::vector<int> units;
  for (const auto& [name, tensor] : full) {
    const auto found = names.find(tensor.unsafeGetTensorImpl());
    if (found == names.end()) {
      throw Error(ErrorKind::recipe,
                  "sharding: parameters shards the model's own weights, but the optimizer "
                  "updates '" +
                      name + "', which is not one of them (a master-weight policy's float32 copy)",
                  {}, "trainer.distributed.sharding",
                  "a master-weight policy that derives from mixt::ShardableMasters (bf16_master, fp16_master, the "
                  "fp8 policies) has its masters kept as the ranks' shards; with this one use sharding: gradients");
    }
    int unit = -1;
    if (owns_its_storage(tensor) && tensors_on[tensor.storage().unsafeGetStorageImpl()] == 1) {
      for (std::size_t b = 0; b < blocks.size(); ++b) {
        bool all_under = true;
        for (const std::string& alias : found->second) all_under = all_under && under(alias, blocks[b]);
        if (all_under && (unit < 0 || blocks[b].size() > blocks[static_cast<std::size_t>(unit)].size())) {
          unit = static_cast<int>(b);
        }
      }
    }
    units.push_back(unit);
  }
  return units;
}

ParameterUnits::ParameterUnits(std::shared_ptr<torch::nn::Module> model, ShardLayout& layout,
                               const std::vector<int>& units, const std::vector<std::string>& blocks,
                               const ProcessGroupCommunicator& communicator, bool prefetch)
    : model_(std::move(model)), layout_(layout), communicator_(communicator), prefetch_(prefetch) {
  std::map<int, std::size_t> index_of_block;
  for (std::size_t i = 0; i < layout_.entries().size(); ++i) {
    const at::Tensor& full = layout_.entries()[i].full;
    storage_bytes_.push_back(full.storage().nbytes());
    if (units[i] < 0) continue;
    auto [where, added] = index_of_block.emplace(units[i], units_.size());
    if (added) {
      units_.push_back({blocks[static_cast<std::size_t>(units[i])], {}, 0, 0, true, std::nullopt});
      unit_by_name_[units_.back().name] = where->second;
    }
    units_[where->second].entries.push_back(i);
  }
  for (const auto& bucket : layout_.buckets()) {
    const int block = units[bucket.front()];
    const int unit = block < 0 ? -1 : static_cast<int>(index_of_block.at(block));
    unit_of_bucket_.push_back(unit);
    if (unit >= 0) ++units_[static_cast<std::size_t>(unit)].buckets;
  }
  gathered_ = static_cast<int>(units_.size());
  place_.assign(units_.size(), -1);
  routing::set_block_gate(*model_, this);
  set_submodule_observer(*model_, this);
}

ParameterUnits::~ParameterUnits() {
  routing::set_block_gate(*model_, nullptr);
  set_submodule_observer(*model_, nullptr);
}

ParameterUnits::Unit* ParameterUnits::find_locked(std::string_view block) {
  const auto found = unit_by_name_.find(block);
  return found == unit_by_name_.end() ? nullptr : &units_[found->second];
}

void ParameterUnits::gather_locked(Unit& unit) {
  if (unit.pending) {
    layout_.finish_all_gather(*unit.pending, communicator_);
    unit.pending.reset();
  }
  if (unit.gathered) return;
  for (const std::size_t i : unit.entries) allocate_storage(layout_.entries()[i].full, storage_bytes_[i]);
  layout_.all_gather_entries(unit.entries, communicator_, "parameter all_gather (" + unit.name + ")");
  unit.gathered = true;
  if (whole_ == 0) most_gathered_ = std::max(most_gathered_, ++gathered_);
}

void ParameterUnits::prefetch_locked(std::size_t index) {
  Unit& unit = units_[index];
  if (unit.gathered) return;
  for (const std::size_t i : unit.entries) allocate_storage(layout_.entries()[i].full, storage_bytes_[i]);
  unit.pending =
      layout_.start_all_gather_entries(unit.entries, communicator_, "parameter all_gather (" + unit.name + ")");
  unit.gathered = true;
  if (whole_ == 0) most_gathered_ = std::max(most_gathered_, ++gathered_);
}

std::optional<std::size_t> ParameterUnits::neighbour(std::size_t unit, int step) const {
  const int place = place_[unit] + step;
  if (place_[unit] < 0 || place < 0 || place >= static_cast<int>(order_.size())) return std::nullopt;
  return order_[static_cast<std::size_t>(place)];
}

void ParameterUnits::release_locked(Unit& unit) {
  if (!unit.gathered || whole_ > 0) return;
  // A gather still moving (a prefetch for a unit that did not run) ends before its storage goes.
  if (unit.pending) gather_locked(unit);
  for (const std::size_t i : unit.entries) release_storage(layout_.entries()[i].full);
  unit.gathered = false;
  --gathered_;
}

void ParameterUnits::release_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Unit& unit : units_) release_locked(unit);
}

void ParameterUnits::after_step() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t b = 0; b < layout_.buckets().size(); ++b) {
    if (unit_of_bucket_[b] < 0) {
      layout_.all_gather_entries(layout_.buckets()[b], communicator_,
                                 "parameter all_gather (bucket " + std::to_string(b) + ")");
    }
  }
  // Released units are refilled from the new shards as they run; one still whole (a whole
  // model scope) is refilled now.
  for (Unit& unit : units_) {
    if (!unit.gathered) continue;
    gather_locked(unit);  // a prefetch still moving the old values ends first
    layout_.all_gather_entries(unit.entries, communicator_, "parameter all_gather (" + unit.name + ")");
  }
}

void ParameterUnits::prepare_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Unit& unit : units_) unit.buckets_taken = 0;
}

void ParameterUnits::gather_whole() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (whole_++ == 0) {
    whole_before_.clear();
    for (const Unit& unit : units_) whole_before_.push_back(unit.gathered);
  }
  for (Unit& unit : units_) gather_locked(unit);
  gathered_ = static_cast<int>(units_.size());
}

void ParameterUnits::release_whole() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (whole_ > 0 && --whole_ == 0) {
    // As before the scope: a unit whole then (the model as built) stays whole.
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!whole_before_[u]) release_locked(units_[u]);
    }
  }
}

void ParameterUnits::on_bucket_taken(std::size_t bucket) {
  const int index = unit_of_bucket_[bucket];
  if (index < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Unit& unit = units_[static_cast<std::size_t>(index)];
  if (++unit.buckets_taken < unit.buckets) return;
  unit.buckets_taken = 0;
  release_locked(unit);
}

void ParameterUnits::entering(std::string_view block) {
  std::lock_guard<std::mutex> lock(mutex_);
  Unit* unit = find_locked(block);
  if (!unit) return;
  const auto index = static_cast<std::size_t>(unit - units_.data());
  // The forward's order, from the first forward: it ends when a unit comes again.
  if (learning_order_ && place_[index] >= 0) learning_order_ = false;
  if (learning_order_) {
    place_[index] = static_cast<int>(order_.size());
    order_.push_back(index);
  }
  gather_locked(*unit);
  if (prefetch_ && !learning_order_) {
    if (const auto next = neighbour(index, +1)) prefetch_locked(*next);
  }
}

void ParameterUnits::observe(std::string_view name, const at::Tensor& output) {
  std::lock_guard<std::mutex> lock(mutex_);
  Unit* unit = find_locked(name);
  if (!unit) return;
  if (at::GradMode::is_enabled() && output.requires_grad()) {
    // Backward reaches the unit when its output's gradient is ready: gather it again first.
    output.register_hook([this, unit](const at::Tensor&) {
      std::lock_guard<std::mutex> relock(mutex_);
      gather_locked(*unit);
      if (!prefetch_) return;
      // Backward goes through the units in the forward's reverse order.
      if (const auto before = neighbour(static_cast<std::size_t>(unit - units_.data()), -1)) prefetch_locked(*before);
    });
  }
  release_locked(*unit);
}

std::string ParameterUnits::report() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (units_.empty()) return {};
  const double mib = static_cast<double>(unit_bytes()) / units_.size() / (1024.0 * 1024.0);
  return "sharding: parameters: at most " + std::to_string(most_gathered_) + " of the " +
         std::to_string(units_.size()) + " blocks' weights were whole at once in training (" +
         c10::str(std::round(mib * 100) / 100) + " MiB a block; the root's " +
         c10::str(std::round(static_cast<double>(root_bytes()) / (1024.0 * 1024.0) * 100) / 100) + " MiB stay whole)";
}

std::int64_t ParameterUnits::unit_bytes() const {
  std::int64_t bytes = 0;
  for (const Unit& unit : units_) {
    for (const std::size_t i : unit.entries) bytes += static_cast<std::int64_t>(storage_bytes_[i]);
  }
  return bytes;
}

std::int64_t ParameterUnits::root_bytes() const {
  std::int64_t all = 0;
  for (const std::size_t bytes : storage_bytes_) all += static_cast<std::int64_t>(bytes);
  return all - unit_bytes();
}

}  // namespace mixt::distributed
