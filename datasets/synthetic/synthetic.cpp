// datasets/synthetic — random inputs and labels of any shape, made once on the target
// device and handed out again and again: the input pipeline drops out of the measurement,
// as in NVIDIA's ResNet-50 throughput benchmarks (DALI's synthetic mode). One batch of
// distinct random samples is generated (from the seed, so runs repeat); every batch of an
// epoch is that batch (the last one cut short unless drop_last).
#include <ATen/CPUGeneratorImpl.h>
#include <mixt/dataset.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

namespace {

class Synthetic : public mixt::Dataset {
 public:
  Synthetic(at::Tensor inputs, at::Tensor targets, std::int64_t shard_size, std::int64_t batch_size,
            std::int64_t num_classes, bool drop_last)
      : inputs_(std::move(inputs)),
        targets_(std::move(targets)),
        shard_size_(shard_size),
        batch_size_(batch_size),
        num_classes_(num_classes),
        drop_last_(drop_last) {}

  std::int64_t size() const override { return shard_size_; }
  std::int64_t num_classes() const override { return num_classes_; }
  std::vector<std::int64_t> sample_shape() const override { return inputs_.sizes().slice(1).vec(); }
  // Counted with the recipe's batch size (the held batch is smaller when the shard is): a
  // batch_size above the shard with drop_last gives no batch, as in every other dataset.
  std::int64_t batches_per_epoch() const override {
    return drop_last_ ? shard_size_ / batch_size_ : (shard_size_ + batch_size_ - 1) / batch_size_;
  }
  void start_epoch(std::int64_t) override { delivered_ = 0; }
  std::optional<mixt::Batch> next_batch() override {
    if (delivered_ >= batches_per_epoch()) return std::nullopt;
    const std::int64_t count = std::min(inputs_.size(0), shard_size_ - delivered_ * inputs_.size(0));
    ++delivered_;
    if (count == inputs_.size(0)) return mixt::Batch{inputs_, targets_};
    return mixt::Batch{inputs_.narrow(0, 0, count), targets_.narrow(0, 0, count)};
  }

 private:
  at::Tensor inputs_, targets_;
  std::int64_t shard_size_, batch_size_, num_classes_;
  bool drop_last_;
  std::int64_t delivered_ = 0;
};

// Upper bounds: the batch count is computed in int64 (size 2^63-1 wrapped negative).
std::optional<std::string> up_to_10_to_the_12(const std::int64_t& n) {
  if (n >= 1 && n <= 1'000'000'000'000) return std::nullopt;
  return "must be in [1, 10^12]";
}

std::optional<std::string> a_positive_shape(const std::vector<std::int64_t>& shape) {
  if (shape.empty()) return "expected at least one dimension, e.g. [3, 224, 224]";
  for (auto d : shape) {
    if (d < 1) return "every dimension must be positive";
  }
  return std::nullopt;
}

struct SyntheticOptions {
  std::vector<std::int64_t> shape = {3, 224, 224};
  std::int64_t num_classes = 1000;
  std::int64_t size = 256 * 100;
  std::int64_t batch_size = 256;
  bool drop_last = false;
  bool channels_last = false;
};

using O = SyntheticOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::shape, "shape", "shape of one input", a_positive_shape)
        .add(&O::num_classes, "num_classes", "labels are uniform in [0, num_classes)", mixt::at_least(1))
        .add(&O::size, "size", "samples per epoch (split across ranks)", up_to_10_to_the_12)
        .add(&O::batch_size, "batch_size", "samples per batch", up_to_10_to_the_12)
        .add(&O::drop_last, "drop_last", "drop the last incomplete batch")
        .add(&O::channels_last, "channels_last", "lay the inputs out channels_last (NHWC memory)")
        .rule("channels_last", [](const O& o) -> std::optional<std::string> {
          if (o.channels_last && o.shape.size() != 3) return "needs a shape of [C, H, W]";
          return std::nullopt;
        });

std::unique_ptr<mixt::Dataset> make_synthetic(const SyntheticOptions& o, const mixt::DatasetContext& context) {
  const std::int64_t shard_size = (o.size + context.world_size - 1) / context.world_size;
  const std::int64_t rows = std::min(o.batch_size, shard_size);
  std::vector<std::int64_t> batch_shape{rows};
  batch_shape.insert(batch_shape.end(), o.shape.begin(), o.shape.end());
  // Generated on the CPU from the seed (and rank), so every device gets the same data.
  auto generator =
      at::make_generator<at::CPUGeneratorImpl>(context.seed * 1000003 + static_cast<std::uint64_t>(context.rank));
  at::Tensor inputs = at::randn(batch_shape, generator, at::kFloat);
  at::Tensor targets = at::randint(o.num_classes, {rows}, generator, at::kLong);
  inputs = inputs.to(context.device);
  if (o.channels_last) inputs = inputs.contiguous(at::MemoryFormat::ChannelsLast);
  return std::make_unique<Synthetic>(inputs, targets.to(context.device), shard_size, o.batch_size, o.num_classes,
                                     o.drop_last);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset(
      "synthetic", "random inputs and labels made once on the device (throughput benchmarks without an input pipeline)",
      kOptions, make_synthetic);
}

}  // namespace

MIXT_PLUGIN("synthetic", "1.0.0", register_components)
