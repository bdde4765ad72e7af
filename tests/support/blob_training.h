// The trainer tests' tiny in-memory problem: Gaussian blobs (as a plain Dataset and as
// samples of a mixt::DataLoader), a small MLP, and the components around them.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/linear.h>

#include <atomic>
#include <set>
#include <memory>
#include <vector>

#include "assembly/components.h"
#include "mixt/helpers/data_loader.h"
#include "mixt/helpers/fp32_modules.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "recipe/recipe_node.h"
#include "common/interrupt.h"
#include "train/progress.h"
#include "assembly/trainer_options.h"

namespace mixt::testing {

// What a BlobDataset does besides serving batches, at the n-th batch it serves (counted
// over the run from 0) or at an epoch's start; -1: never.
struct BlobEvents {
  std::int64_t interrupt_at = -1;         // requests an interrupt, as SIGINT does
  std::int64_t nan_at = -1;               // serves a NaN input
  std::int64_t fail_at = -1;              // fails as a bad file does under on_bad_sample: fail
  std::int64_t fail_starting_epoch = -1;  // fails to start this epoch (0-based)
};

// Two Gaussian blobs per class in 8 dimensions: 4 classes, 256 samples, batches of 16,
// with the `events` asked for. The batches given to overflow_at (by serving order) are
// multiplied by 1e6: beyond float16's range (65504), well inside bfloat16's.
class BlobDataset : public Dataset {
 public:
  explicit BlobDataset(std::uint64_t seed, BlobEvents events = {})
      : interrupt_at_(events.interrupt_at),
        nan_at_(events.nan_at),
        fail_at_(events.fail_at),
        fail_starting_epoch_(events.fail_starting_epoch) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(99);
    const at::Tensor centers = at::randn({4, 8}, generator) * 3;
    labels_ = at::arange(256, at::kLong) % 4;
    inputs_ = centers.index_select(0, labels_) + at::randn({256, 8}, generator);
    seed_ = seed;
  }
  void overflow_at(std::set<std::int64_t> batches) { overflow_ = std::move(batches); }
  const at::Tensor& inputs() const { return inputs_; }
  const at::Tensor& labels() const { return labels_; }
  std::int64_t size() const override { return 256; }
  std::int64_t num_classes() const override { return 4; }
  std::vector<std::int64_t> sample_shape() const override { return {8}; }
  std::int64_t batches_per_epoch() const override { return 16; }
  void start_epoch(std::int64_t epoch) override {
    if (epoch == fail_starting_epoch_) throw runtime_error("cannot start epoch " + std::to_string(epoch + 1));
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_ + epoch);
    order_ = at::randperm(256, generator, at::kLong);
    position_ = 0;
  }
  std::optional<Batch> next_batch() override {
    if (position_ >= 256) return std::nullopt;
    const std::int64_t served = served_++;
    if (served == interrupt_at_) request_interrupt();
    if (served == fail_at_) throw runtime_error("bad sample blob-7: cannot decode", "fix or remove the file");
    const at::Tensor picked = order_.slice(0, position_, position_ + 16);
    position_ += 16;
    Batch batch{inputs_.index_select(0, picked), labels_.index_select(0, picked)};
    if (served == nan_at_) batch.inputs[0][0] = NAN;
    if (overflow_.count(served)) batch.inputs = batch.inputs * 1e6;
    return batch;
  }

 private:
  at::Tensor inputs_, labels_, order_;
  std::set<std::int64_t> overflow_;
  std::uint64_t seed_ = 0;
  std::int64_t position_ = 0, served_ = 0, interrupt_at_, nan_at_, fail_at_, fail_starting_epoch_;
};

// The same blobs as samples of a mixt::DataLoader (what image_folder builds on), counting
// the samples it loads.
class BlobSource : public SampleSource {
 public:
  BlobSource() {
    const BlobDataset blobs(0);
    inputs_ = blobs.inputs();
    labels_ = blobs.labels();
  }
  std::int64_t size() const override { return 256; }
  std::string sample_name(std::int64_t i) const override { return "blob-" + std::to_string(i); }
  Sample load(std::int64_t i, SampleRng&) const override {
    ++loads;
    return {inputs_[i].clone(), labels_[i].item<std::int64_t>()};
  }
  mutable std::atomic<std::int64_t> loads{0};

 private:
  at::Tensor inputs_, labels_;
};

// A LoaderDataset (a dataset that resumes mid-epoch) that can request an interrupt.
class InterruptibleLoaderDataset : public LoaderDataset {
 public:
  InterruptibleLoaderDataset(std::shared_ptr<const SampleSource> source, LoaderOptions options,
                             std::int64_t interrupt_at)
      : LoaderDataset(std::move(source), std::move(options), 4, {8}), interrupt_at_(interrupt_at) {}
  std::optional<Batch> next_batch() override {
    if (served_++ == interrupt_at_) request_interrupt();
    return LoaderDataset::next_batch();
  }

 private:
  std::int64_t served_ = 0, interrupt_at_;
};

class TinyMlp : public Model {
 public:
  explicit TinyMlp(std::int64_t width = 16) {
    hidden_ = register_module("hidden", torch::nn::Linear(8, width));
    out_ = register_module("out", torch::nn::Linear(width, 4));
  }
  // `out` is routed, so precision.fp32_modules can keep it in float32.
  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor h = at::relu(hidden_->forward(x));
    return call_submodule(*this, "out", h, [&](const at::Tensor& in) { return out_->forward(in); });
  }

 private:
  torch::nn::Linear hidden_{nullptr}, out_{nullptr};
};

struct Fixture {
  BuiltPlugins plugins;
  RecipeNodePtr root = parse_yaml("optimizer: {name: sgd, lr: 0.05, momentum: 0.9}", "test");
  Components components;
  RunFacts facts;  // as a hand-built run's: on the CPU, no records, no data order
  Progress progress{false, 1000};

  // `events`: what the training data does when (the validation data does nothing).
  explicit Fixture(BlobEvents events = {}) {
    at::manual_seed(0);
    components.train = std::make_unique<BlobDataset>(5, events);
    components.val = std::make_unique<BlobDataset>(5);
    components.precision = std::make_unique<PrecisionPolicy>();
    components.task = plugins.classification();
    use_model(std::make_shared<TinyMlp>());
  }
  void use_model(std::shared_ptr<Model> model) {
    components.model = std::move(model);
    OptimizerContext context;
    for (const auto& p : components.model->named_parameters()) {
      context.named_parameters.emplace_back(p.key(), p.value());
    }
    components.optimizer = plugins.registry.make_optimizer(Config(root, "").section("optimizer"), context);
  }
  std::vector<at::Tensor> weights() const {
    std::vector<at::Tensor> out;
    for (const auto& p : components.model->parameters()) out.push_back(p.detach().clone());
    return out;
  }
};

inline TrainerOptions options(std::int64_t epochs) {
  TrainerOptions o;
  o.epochs = epochs;
  o.log_every = 1000;
  return o;
}

inline bool same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace mixt::testing
