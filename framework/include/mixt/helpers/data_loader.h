// mixt/helpers/data_loader.h — the multi-threaded loader that dataset plugins build on.
//
// A plugin describes its samples (a SampleSource: how many, and how to load and augment
// sample i); the DataLoader turns them into batches:
//
//   - the epoch's order is torch.utils.data.DistributedSampler's: randperm(n) from a
//     generator seeded with seed + epoch (or 0..n-1 without shuffle), padded by repeating
//     its start to a multiple of world_size, and every world_size-th index from `rank`;
//   - `workers` threads build whole batches, at most `prefetch` batches ahead of the
//     consumer; batches come out in order;
//   - sample i of epoch e is augmented with SampleRng::for_sample(seed, e, i): batches are
//     identical whatever the number of workers;
//   - on a CUDA device the batch is assembled in pinned host memory and copied with
//     non_blocking, so the copy overlaps the host and the workers keep decoding the next
//     batches while the current one trains;
//   - a sample whose load throws BadSample is skipped (the batch is one shorter), counted,
//     and named in a warning once; with on_bad_sample = fail the epoch stops with an error
//     naming it. A batch of only bad samples is passed over with world_size 1 and is an
//     error with more (that rank would end the epoch a step before the others).
//
// LoaderDataset wraps a loader as a mixt::Dataset, which is all most plugins need:
//
//   struct MyOptions { mixt::LoaderKeys loader; ... };
//   kOptions = mixt::OptionsOf<MyOptions>()...include(&MyOptions::loader, mixt::loader_keys());
//   auto options = o.loader.for_context(context, /*shuffle_default=*/context.split == "train");
//   return std::make_unique<mixt::LoaderDataset>(source, options, num_classes, shape);
//
// or, when the classes have names, NamedLoaderDataset(source, options, class_names, shape).
//
// A sample whose target is a tensor (a segmentation mask) comes from a TensorSampleSource
// (since ABI 6.5): the loader stacks its targets into the batch's [N, *target shape].
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mixt/config.h"
#include "mixt/dataset.h"
#include "mixt/options.h"
#include "mixt/padded_shards.h"
#include "mixt/helpers/sample_rng.h"
#include "mixt/option_doc.h"

namespace mixt {

struct Sample {
  at::Tensor input;         // float C x H x W (every sample of a dataset the same shape)
  std::int64_t target = 0;  // class index
};

// Thrown by SampleSource::load for a sample that cannot be used (undecodable, truncated).
class BadSample : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Samples in the whole dataset (every shard).
  virtual std::int64_t size() const = 0;
  // Loads and augments sample `index`, drawing every random choice from `rng`. Called from
  // several worker threads at once: must be thread-safe.
  virtual Sample load(std::int64_t index, SampleRng& rng) const = 0;
  // How messages name the sample (its file, usually).
  virtual std::string sample_name(std::int64_t index) const = 0;
};

// Since ABI 6.5: a sample whose target is a tensor (a class index per pixel) rather than
// one class index. Its own struct, not a field appended to Sample: a 6.3 plugin's load()
// constructs Sample in memory its caller sizes, so a longer Sample would be read past what
// the old plugin wrote.
struct TensorSample {
  at::Tensor input;   // as Sample::input
  at::Tensor target;  // any dtype and shape, the same for every sample of the dataset
};

// Since ABI 6.5. A SampleSource whose samples carry a target tensor: the loader finds it
// with a dynamic_cast (its type information lives in libmixt) and calls load_tensor_sample()
// instead of load(), with the same rng, BadSample and thread-safety rules. The batch's
// targets are the samples' target tensors stacked ([N, *target shape], in the first
// sample's dtype); a sample whose target has another shape stops the epoch with an error
// naming it. load() is not called: it throws.
class TensorSampleSource : public SampleSource {
 public:
  ~TensorSampleSource() override;
  virtual TensorSample load_tensor_sample(std::int64_t index, SampleRng& rng) const = 0;
  Sample load(std::int64_t index, SampleRng& rng) const final;
};

enum class OnBadSample { skip, fail };

// The loader's batch_size unless a dataset passes its own (cifar10: 128).
inline constexpr std::int64_t kDefaultBatchSize = 64;

// The loader threads a recipe's dataset gets when it names none: min(4, cores).
std::int64_t default_loader_workers();

struct LoaderOptions {
  std::int64_t batch_size = kDefaultBatchSize;
  bool shuffle = true;
  bool drop_last = false;
  std::int64_t workers = default_loader_workers();  // 0: batches are built in the thread that asks for them
  std::int64_t prefetch = 0;  // batches built or being built ahead of the consumer; 0: 2 per worker
  OnBadSample on_bad_sample = OnBadSample::skip;
  std::uint64_t seed = 0;
  std::int64_t rank = 0;
  std::int64_t world_size = 1;
  at::Device device = at::kCPU;
  // Where warnings go; default: stderr as "mixt: warning: ...".
  std::function<void(const std::string&)> warn;
};

// The loader's keys in a dataset's recipe section.
struct LoaderKeys {
  std::int64_t batch_size = kDefaultBatchSize;
  std::optional<bool> shuffle;          // absent: the dataset's default (true for train)
  bool drop_last = false;
  std::optional<std::int64_t> workers;  // absent: default_loader_workers()
  std::int64_t prefetch = 0;
  OnBadSample on_bad_sample = OnBadSample::skip;

  // The loader's options: these, with seed, rank, world_size and device from the context.
  LoaderOptions for_context(const DatasetContext& context, bool shuffle_default) const;
};

// batch_size, shuffle, drop_last, workers, prefetch and on_bad_sample, for OptionsOf::include;
// a dataset with its own default batch size passes it.
OptionsOf<LoaderKeys> loader_keys(std::int64_t batch_size_default = kDefaultBatchSize);

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const SampleSource> source, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  std::int64_t size() const;  // samples in this shard per epoch
  // Of those, the first ones that are this rank's own (the rest are DistributedSampler's padding).
  std::int64_t own_samples() const;
  std::int64_t batches_per_epoch() const;
  // Starts epoch `epoch`; abandons what is left of the previous one.
  void start_epoch(std::int64_t epoch);
  // Starts epoch `epoch` at batch number `first_batch` of its order: the batches before it
  // are neither loaded nor delivered. A run resuming mid-epoch passes the position() it
  // saved and goes on with exactly the batches it would have had, without decoding the
  // ones it already trained on.
  void start_epoch(std::int64_t epoch, std::int64_t first_batch);
  // Batch numbers of the current epoch delivered or passed over so far, counting batches
  // whose every sample was bad (next_batch() skips those) and those before first_batch.
  std::int64_t position() const;
  // The next batch (on options.device), or nothing at the end of the epoch. Rethrows what
  // a worker threw (on_bad_sample: fail, a transform error).
  std::optional<Batch> next_batch();
  // Samples skipped as bad since the loader was made.
  std::int64_t bad_samples() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

class LoaderDataset : public Dataset, public ResumesMidEpoch, public CountsBadSamples, public PadsShards {
 public:
  LoaderDataset(std::shared_ptr<const SampleSource> source, LoaderOptions options, std::int64_t num_classes,
                std::vector<std::int64_t> sample_shape)
      : loader_(std::move(source), std::move(options)),
        num_classes_(num_classes),
        sample_shape_(std::move(sample_shape)) {}
  ~LoaderDataset() override;

  std::int64_t size() const override { return loader_.size(); }
  std::int64_t num_classes() const override { return num_classes_; }
  std::vector<std::int64_t> sample_shape() const override { return sample_shape_; }
  std::int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
  void start_epoch(std::int64_t epoch) override { loader_.start_epoch(epoch); }
  std::optional<Batch> next_batch() override { return loader_.next_batch(); }
  std::int64_t position() const override { return loader_.position(); }
  void start_epoch_at(std::int64_t epoch, std::int64_t first_batch) override {
    loader_.start_epoch(epoch, first_batch);
  }
  std::int64_t bad_samples() const override { return loader_.bad_samples(); }
  std::int64_t own_samples() const override { return loader_.own_samples(); }
  DatasetCapabilities capabilities() override {
    DatasetCapabilities can;
    can.resumes_mid_epoch = this;
    can.counts_bad_samples = this;
    can.pads_shards = this;
    return can;
  }
  DataLoader& loader() { return loader_; }

 private:
  DataLoader loader_;
  std::int64_t num_classes_;
  std::vector<std::int64_t> sample_shape_;
};

// A LoaderDataset whose classes have names (see NamedClasses in mixt/dataset.h): the
// class count is the number of names.
class NamedLoaderDataset : public LoaderDataset, public NamedClasses {
 public:
  NamedLoaderDataset(std::shared_ptr<const SampleSource> source, LoaderOptions options,
                     std::vector<std::string> class_names, std::vector<std::int64_t> sample_shape)
      : LoaderDataset(std::move(source), std::move(options), static_cast<std::int64_t>(class_names.size()),
                      std::move(sample_shape)),
        class_names_(std::move(class_names)) {}
  std::vector<std::string> class_names() const override { return class_names_; }
  DatasetCapabilities capabilities() override {
    DatasetCapabilities can = LoaderDataset::capabilities();
    can.named_classes = this;
    return can;
  }

 private:
  std::vector<std::string> class_names_;
};

}  // namespace mixt
