// The multi-threaded loader of mixt/helpers/data_loader.h.
//
// Workers claim batch numbers in order, build the whole batch, and file it under its
// number; next_batch() hands them out strictly in order. A generation counter lets
// start_epoch() abandon an epoch while workers are still busy with it: what they finish
// for an old generation is dropped.
#include "mixt/helpers/data_loader.h"

#include <ATen/CPUGeneratorImpl.h>

#include <condition_variable>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "mixt/error.h"
#include "common/warnings.h"

// OpenMP's per-thread team size (libgomp, loaded with LibTorch). Weak, so a LibTorch
// built without OpenMP still links.
extern "C" void omp_set_num_threads(int) __attribute__((weak));

namespace mixt {

namespace {

// torch.utils.data.DistributedSampler.__iter__ (drop_last=False): this rank's indices.
std::vector<std::int64_t> shard_order(std::int64_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch,
                                      std::int64_t rank, std::int64_t world_size) {
  at::Tensor order;
  if (shuffle) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<std::uint64_t>(epoch));
    order = at::randperm(n, generator, at::kLong);
  } else {
    order = at::arange(n, at::kLong);
  }
  const std::int64_t* all = order.data_ptr<std::int64_t>();
  const std::int64_t per_rank = (n + world_size - 1) / world_size;
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_rank));
  for (std::int64_t k = rank; k < per_rank * world_size; k += world_size) mine.push_back(all[k % n]);
  return mine;
}

struct BuiltBatch {
  std::optional<Batch> batch;  // empty when every sample of it was bad
  std::exception_ptr error;
};

}  // namespace

struct DataLoader::State {
  std::shared_ptr<const SampleSource> source;
  const TensorSampleSource* tensor_source = nullptr;  // the source, when its targets are tensors
  LoaderOptions options;
  std::int64_t shard_size = 0;
  bool pin = false;

  std::mutex mutex;
  std::condition_variable work_ready;   // workers wait for a batch to claim
  std::condition_variable batch_ready;  // the consumer waits for the next batch in order
  std::uint64_t generation = 0;
  std::int64_t epoch = 0;
  std::shared_ptr<const std::vector<std::int64_t>> order;
  std::int64_t total_batches = 0;  // this epoch
  std::int64_t next_to_claim = 0;
  std::int64_t next_to_deliver = 0;
  std::map<std::int64_t, BuiltBatch> ready;
  bool stopping = false;
  std::vector<std::thread> workers;

  // Batch buffers of the CPU path, reused once training has let go of them: a fresh
  // 150 MB buffer per batch costs ~37k page faults, a sixth of the loader's CPU time in
  // bench/data_pipeline. (Pinned buffers are not pooled: the CUDA host allocator already
  // caches them, and knows when an asynchronous copy out of one has finished.)
  std::mutex pool_mutex;
  std::vector<at::Tensor> pool;

  at::Tensor batch_buffer(const std::vector<std::int64_t>& shape, at::ScalarType dtype, at::MemoryFormat format) {
    const auto options = at::TensorOptions(dtype).pinned_memory(pin).memory_format(format);
    if (pin) return at::empty(shape, options);
    std::lock_guard lock(pool_mutex);
    for (const at::Tensor& buffer : pool) {
      // Free: only the pool refers to it — no worker holds it (tensor count) and no batch
      // handed out views its memory (storage count).
      const bool free = buffer.use_count() == 1 && buffer.unsafeGetTensorImpl()->storage().use_count() == 1;
      if (free && buffer.sizes() == at::IntArrayRef(shape) && buffer.scalar_type() == dtype &&
          buffer.is_contiguous(format)) {
        return buffer;
      }
    }
    at::Tensor fresh = at::empty(shape, options);
    if (static_cast<std::int64_t>(pool.size()) < pool_limit()) pool.push_back(fresh);
    return fresh;
  }
  // Enough for every batch in flight (prefetched, being built, being trained on) plus slack.
  std::int64_t pool_limit() const { return options.prefetch + options.workers + 3; }

  std::mutex bad_mutex;
  std::set<std::int64_t> warned;
  std::int64_t bad_count = 0;

  void warn(const std::string& message) const {
    if (options.warn) {
      options.warn(message);
    } else {
      mixt::warn(message);
    }
  }

  // A sample that could not be loaded: counted and named once, or fatal.
  void bad_sample(std::int64_t index, const std::string& why) {
    const std::string name = source->sample_name(index);
    if (options.on_bad_sample == OnBadSample::fail) {
      throw runtime_error("bad sample " + name + ": " + why,
                          "fix or remove the file, or set on_bad_sample: skip to skip such samples");
    }
    std::lock_guard lock(bad_mutex);
    ++bad_count;
    if (warned.insert(index).second) warn("skipping bad sample " + name + ": " + why);
  }

  // Sample `index`: a TensorSampleSource's as it is, another source's with its class index
  // in `class_index`.
  TensorSample load(std::int64_t index, SampleRng& rng, std::int64_t& class_index) const {
    if (tensor_source) return tensor_source->load_tensor_sample(index, rng);
    Sample sample = source->load(index, rng);
    class_index = sample.target;
    return {std::move(sample.input), {}};
  }
  at::Tensor class_targets(const std::vector<std::int64_t>& targets) const {
    at::Tensor batch =
        at::empty({static_cast<std::int64_t>(targets.size())}, at::TensorOptions(at::kLong).pinned_memory(pin));
    std::copy(targets.begin(), targets.end(), batch.data_ptr<std::int64_t>());
    return batch;
  }
  at::Tensor stack_targets(const std::vector<at::Tensor>& targets) const {
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(targets.size())};
    for (auto d : targets[0].sizes()) shape.push_back(d);
    at::Tensor batch = at::empty(shape, at::TensorOptions(targets[0].scalar_type()).pinned_memory(pin));
    for (std::size_t i = 0; i < targets.size(); ++i) batch[static_cast<std::int64_t>(i)].copy_(targets[i]);
    return batch;
  }

  BuiltBatch build(const std::vector<std::int64_t>& indices, std::int64_t batch, std::int64_t for_epoch) {
    BuiltBatch built;
    try {
      const std::int64_t begin = batch * options.batch_size;
      const std::int64_t end = std::min(begin + options.batch_size, static_cast<std::int64_t>(indices.size()));
      at::Tensor inputs;
      std::vector<std::int64_t> targets;
      std::vector<at::Tensor> target_tensors;  // a TensorSampleSource's
      std::int64_t count = 0;                  // samples in the batch so far
      for (std::int64_t position = begin; position < end; ++position) {
        const std::int64_t index = indices[static_cast<std::size_t>(position)];
        SampleRng rng = SampleRng::for_sample(options.seed, static_cast<std::uint64_t>(for_epoch),
                                              static_cast<std::uint64_t>(index));
        TensorSample sample;
        std::int64_t class_index = 0;
        try {
          sample = load(index, rng, class_index);
        } catch (const BadSample& e) {
          bad_sample(index, e.what());
          continue;
        }
        if (!inputs.defined()) {
          // The batch takes the first sample's shape and memory layout (channels_last
          // when to_tensor made it so), in pinned memory when it goes to a GPU.
          std::vector<std::int64_t> shape{end - begin};
          for (auto d : sample.input.sizes()) shape.push_back(d);
          const bool channels_last = sample.input.dim() == 3 && sample.input.stride(0) == 1 && sample.input.size(0) > 1;
          inputs = batch_buffer(shape, sample.input.scalar_type(),
                                channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
        } else if (sample.input.sizes() != inputs.sizes().slice(1)) {
          throw runtime_error("sample " + source->sample_name(index) + " has shape " +
                                  c10::str(sample.input.sizes()) + " but the batch has " +
                                  c10::str(inputs.sizes().slice(1)),
                              "make every sample the same size: end the transforms with a crop "
                              "(center_crop or random_resized_crop)");
        }
        if (tensor_source && !sample.target.defined()) {
          throw runtime_error("sample " + source->sample_name(index) + " has no target tensor",
                              "a TensorSampleSource's load_tensor_sample() sets TensorSample::target");
        }
        if (tensor_source && !target_tensors.empty() && sample.target.sizes() != target_tensors[0].sizes()) {
          throw runtime_error("sample " + source->sample_name(index) + " has a target of shape " +
                                  c10::str(sample.target.sizes()) + " but the batch's first has " +
                                  c10::str(target_tensors[0].sizes()),
                              "make every sample's target the same size as its input (crop both together)");
        }
        inputs[count++].copy_(sample.input);
        if (tensor_source) {
          target_tensors.push_back(std::move(sample.target));
        } else {
          targets.push_back(class_index);
        }
      }
      if (count > 0) {
        built.batch =
            Batch{inputs.narrow(0, 0, count), tensor_source ? stack_targets(target_tensors) : class_targets(targets)};
      }
    } catch (...) {
      built.error = std::current_exception();
    }
    return built;
  }

  void work() {
    // One thread per worker already: ATen ops inside a worker run single-threaded, as
    // PyTorch's DataLoader workers do (torch.set_num_threads(1)).
    if (omp_set_num_threads != nullptr) omp_set_num_threads(1);
    std::unique_lock lock(mutex);
    while (true) {
      work_ready.wait(lock, [&] {
        return stopping || (next_to_claim < total_batches && next_to_claim < next_to_deliver + options.prefetch);
      });
      if (stopping) return;
      const std::int64_t batch = next_to_claim++;
      const std::uint64_t my_generation = generation;
      const std::int64_t my_epoch = epoch;
      const auto my_order = order;
      lock.unlock();
      BuiltBatch built = build(*my_order, batch, my_epoch);
      lock.lock();
      if (my_generation == generation) {
        ready.emplace(batch, std::move(built));
        batch_ready.notify_all();
      }
    }
  }
};

DataLoader::DataLoader(std::shared_ptr<const SampleSource> source, LoaderOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (options.batch_size < 1) throw runtime_error("data loader: batch_size must be at least 1");
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw runtime_error("data loader: rank " + std::to_string(options.rank) + " is outside world_size " +
                        std::to_string(options.world_size));
  }
  if (options.workers < 0) options.workers = 0;
  if (options.prefetch <= 0) options.prefetch = 2 * std::max<std::int64_t>(options.workers, 1);
  const std::int64_t n = source->size();
  s.shard_size = n == 0 ? 0 : (n + options.world_size - 1) / options.world_size;
  s.pin = options.device.is_cuda() && at::globalContext().hasCUDA();
  s.source = std::move(source);
  s.tensor_source = dynamic_cast<const TensorSampleSource*>(s.source.get());
  s.options = std::move(options);
  for (std::int64_t i = 0; i < s.options.workers; ++i) s.workers.emplace_back([&s] { s.work(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->work_ready.notify_all();
  for (auto& worker : state_->workers) worker.join();
}

std::int64_t DataLoader::size() const { return state_->shard_size; }

std::int64_t DataLoader::own_samples() const {
  return distributed_sampler_own_samples(state_->source->size(), state_->options.rank, state_->options.world_size);
}

std::int64_t DataLoader::batches_per_epoch() const {
  const std::int64_t b = state_->options.batch_size, n = state_->shard_size;
  return state_->options.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch(std::int64_t epoch) { start_epoch(epoch, 0); }

void DataLoader::start_epoch(std::int64_t epoch, std::int64_t first_batch) {
  State& s = *state_;
  if (first_batch < 0 || first_batch > batches_per_epoch()) {
    throw runtime_error("data loader: cannot start epoch " + std::to_string(epoch + 1) + " after batch " +
                        std::to_string(first_batch) + ": it has " + std::to_string(batches_per_epoch()) +
                        " batches");
  }
  auto order = std::make_shared<const std::vector<std::int64_t>>(
      s.shard_size == 0 ? std::vector<std::int64_t>{}
                        : shard_order(s.source->size(), s.options.shuffle, s.options.seed, epoch, s.options.rank,
                                      s.options.world_size));
  {
    std::lock_guard lock(s.mutex);
    ++s.generation;
    s.epoch = epoch;
    s.order = std::move(order);
    s.total_batches = batches_per_epoch();
    s.next_to_claim = first_batch;
    s.next_to_deliver = first_batch;
    s.ready.clear();
  }
  s.work_ready.notify_all();
}

std::optional<Batch> DataLoader::next_batch() {
  State& s = *state_;
  while (true) {
    BuiltBatch built;
    std::int64_t number = 0, epoch = 0;
    {
      std::unique_lock lock(s.mutex);
      if (!s.order) throw runtime_error("data loader: next_batch() before start_epoch()");
      if (s.next_to_deliver >= s.total_batches) return std::nullopt;
      number = s.next_to_deliver;
      epoch = s.epoch;
      if (s.workers.empty()) {
        built = s.build(*s.order, s.next_to_deliver, s.epoch);
      } else {
        s.batch_ready.wait(lock, [&] { return s.ready.contains(s.next_to_deliver); });
        auto node = s.ready.extract(s.next_to_deliver);
        built = std::move(node.mapped());
      }
      ++s.next_to_deliver;
    }
    s.work_ready.notify_all();
    if (built.error) std::rethrow_exception(built.error);
    if (!built.batch) {
      // Every sample of that batch was bad. One process just goes on with the next batch;
      // a rank of several cannot: it would end the epoch a batch early and its collectives
      // would stop pairing with the other ranks' (Gloo aborts the process on the mismatch).
      if (s.options.world_size > 1) {
        throw runtime_error("every sample of batch " + std::to_string(number + 1) + " of epoch " +
                                std::to_string(epoch + 1) + " on rank " + std::to_string(s.options.rank) + " of " +
                                std::to_string(s.options.world_size) + " is bad (see the warnings above)",
                            "fix or remove those files, or use a larger batch_size: with several ranks a whole batch "
                            "cannot be skipped without leaving this rank a step behind the others");
      }
      continue;
    }
    Batch batch = std::move(*built.batch);
    if (s.options.device != batch.inputs.device()) {
      batch.inputs = batch.inputs.to(s.options.device, /*non_blocking=*/s.pin);
      batch.targets = batch.targets.to(s.options.device, /*non_blocking=*/s.pin);
    }
    return batch;
  }
}

std::int64_t DataLoader::position() const {
  std::lock_guard lock(state_->mutex);
  return state_->next_to_deliver;
}

LoaderDataset::~LoaderDataset() = default;

std::int64_t DataLoader::bad_samples() const {
  std::lock_guard lock(state_->bad_mutex);
  return state_->bad_count;
}

TensorSampleSource::~TensorSampleSource() = default;

Sample TensorSampleSource::load(std::int64_t index, SampleRng& /*rng*/) const {
  throw std::logic_error("TensorSampleSource::load called for " + sample_name(index) +
                         ": the loader calls load_tensor_sample() on such a source");
}

}  // namespace mixt
