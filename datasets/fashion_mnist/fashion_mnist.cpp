// datasets/fashion_mnist — Fashion-MNIST from its IDX .gz files (Debian package
// dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist).
// The whole split lives in memory as uint8 (47 MB for train); batches are gathered,
// converted to float and normalised on the fly. Each epoch is shuffled with a generator
// seeded with seed + epoch (torch.utils.data.DistributedSampler's rule), so an epoch's
// order depends only on the seed and the epoch.
#include <ATen/CPUGeneratorImpl.h>
#include <mixt/dataset.h>
#include <mixt/padded_shards.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <filesystem>
#include <string>
#include <vector>

#include "idx_reader.h"

namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";

class FashionMnist : public mixt::Dataset,
                     public mixt::NamedClasses,
                     public mixt::PadsShards,
                     public mixt::DescribesPreprocessing {
 public:
  mixt::DatasetCapabilities capabilities() override {
    mixt::DatasetCapabilities can;
    can.named_classes = this;
    can.pads_shards = this;
    can.describes_preprocessing = this;
    return can;
  }
  std::string preprocessing() const override {
    const std::string scaled = "28x28 grey, pixel values / 255";
    if (!normalize_) return scaled;
    return scaled + " -> normalize(mean=" + mixt::format_yaml(mean_) + ", std=" + mixt::format_yaml(std_) + ")";
  }
  FashionMnist(at::Tensor images, at::Tensor labels, std::int64_t batch_size, bool shuffle, bool drop_last,
               bool normalize, double mean, double std, const mixt::DatasetContext& context)
      : images_(std::move(images)),
        labels_(std::move(labels)),
        batch_size_(batch_size),
        shuffle_(shuffle),
        drop_last_(drop_last),
        normalize_(normalize),
        mean_(mean),
        std_(std),
        seed_(context.seed),
        rank_(context.rank),
        world_size_(context.world_size) {
    // DistributedSampler: every rank gets ceil(N / world) samples (wrapping around).
    shard_size_ = (images_.size(0) + world_size_ - 1) / world_size_;
  }

  std::int64_t size() const override { return shard_size_; }
  std::int64_t own_samples() const override {
    return mixt::distributed_sampler_own_samples(images_.size(0), rank_, world_size_);
  }
  std::int64_t num_classes() const override { return 10; }
  // The dataset's labels, as torchvision's FashionMNIST.classes names them.
  std::vector<std::string> class_names() const override {
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  }
  std::vector<std::int64_t> sample_shape() const override {
    return {images_.size(1), images_.size(2), images_.size(3)};
  }
  std::int64_t batches_per_epoch() const override {
    return drop_last_ ? shard_size_ / batch_size_ : (shard_size_ + batch_size_ - 1) / batch_size_;
  }

  void start_epoch(std::int64_t epoch) override {
    const std::int64_t n = images_.size(0);
    at::Tensor order;
    if (shuffle_) {
      auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<std::uint64_t>(epoch));
      order = at::randperm(n, generator, at::kLong);
    } else {
      order = at::arange(n, at::kLong);
    }
    const std::int64_t total = shard_size_ * world_size_;
    if (total > n) order = at::cat({order, order.slice(0, 0, total - n)});
    indices_ = order.slice(0, rank_, total, world_size_);
    position_ = 0;
  }

  std::optional<mixt::Batch> next_batch() override {
    const std::int64_t remaining = indices_.size(0) - position_;
    if (remaining <= 0 || (drop_last_ && remaining < batch_size_)) return std::nullopt;
    const at::Tensor picked = indices_.slice(0, position_, position_ + std::min(batch_size_, remaining));
    position_ += picked.size(0);
    at::Tensor inputs = images_.index_select(0, picked).to(at::kFloat).div_(255.0);
    if (normalize_) inputs.sub_(mean_).div_(std_);
    return mixt::Batch{inputs, labels_.index_select(0, picked)};
  }

 private:
  at::Tensor images_, labels_, indices_;
  std::int64_t batch_size_;
  bool shuffle_, drop_last_, normalize_;
  double mean_, std_;
  std::uint64_t seed_;
  std::int64_t rank_, world_size_, shard_size_ = 0, position_ = 0;
};

struct FashionMnistOptions {
  std::string root = kDefaultRoot;
  std::optional<std::string> split;  // absent: train for data.train, test otherwise
  std::int64_t batch_size = 64;
  std::optional<bool> shuffle;  // absent: true for the train split
  bool drop_last = false;
  std::int64_t limit = 0;
  bool normalize = true;
  // The training set's mean and standard deviation of pixel values in [0, 1].
  double mean = 0.2860;
  double std = 0.3530;
  mixt::RecipeSection where;
};

using O = FashionMnistOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::root, "root", "directory with the IDX .gz files")
        .contextual(&O::split, "split", "train for data.train, test for data.val", "train: 60k images; test: 10k",
                    mixt::one_of({"train", "test"}))
        .add(&O::batch_size, "batch_size", "samples per batch", mixt::at_least(1))
        .contextual(&O::shuffle, "shuffle", "true for train", "reshuffle every epoch (seed + epoch)")
        .add(&O::drop_last, "drop_last", "drop the last incomplete batch")
        .add(&O::limit, "limit", "use only the first N samples (0 = all)", mixt::at_least(0))
        .add(&O::normalize, "normalize", "subtract mean, divide by std")
        .add(&O::mean, "mean", "pixel mean (of [0,1] values)")
        .add(&O::std, "std", "pixel standard deviation", mixt::above(0))
        .recipe_section(&O::where);

std::unique_ptr<mixt::Dataset> make_fashion_mnist(const FashionMnistOptions& o, const mixt::DatasetContext& context) {
  const std::string& root = o.root;
  const mixt::RecipeSection& c = o.where;
  const std::string split = o.split.value_or(context.split == "train" ? "train" : "test");
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    c.fail("root", "dataset root does not exist: " + root,
           "install the Debian package dataset-fashion-mnist (scripts/setup does), or point root: at a "
           "directory with the four IDX .gz files");
  }
  const std::string prefix = split == "train" ? "train" : "t10k";
  auto locate = [&](const std::string& stem) {
    for (const char* suffix : {".gz", ""}) {
      const fs::path file = fs::path(root) / (prefix + stem + std::string(suffix));
      if (fs::exists(file, ec)) return file;
    }
    c.fail("root", "missing " + prefix + stem + ".gz in " + root);
  };
  at::Tensor images, labels;
  try {
    images = fashion_mnist::read_idx_images(locate("-images-idx3-ubyte"));
    labels = fashion_mnist::read_idx_labels(locate("-labels-idx1-ubyte"));
  } catch (const mixt::Error&) {
    throw;
  } catch (const std::exception& e) {
    c.fail("root", e.what());
  }
  if (images.size(0) != labels.size(0)) {
    c.fail("root", "image and label files disagree: " + std::to_string(images.size(0)) + " images, " +
                       std::to_string(labels.size(0)) + " labels");
  }
  if (o.limit > 0 && o.limit < images.size(0)) {
    images = images.slice(0, 0, o.limit).contiguous();
    labels = labels.slice(0, 0, o.limit).contiguous();
  }
  return std::make_unique<FashionMnist>(images, labels, o.batch_size, o.shuffle.value_or(split == "train"), o.drop_last,
                                        o.normalize, o.mean, o.std, context);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset("fashion_mnist", "Fashion-MNIST 28x28 grey images, 10 classes (IDX .gz files)", kOptions,
                        make_fashion_mnist);
}

}  // namespace

MIXT_PLUGIN("fashion_mnist", "1.0.0", register_components)
