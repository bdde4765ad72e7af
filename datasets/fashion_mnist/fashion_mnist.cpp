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

class FashionMnist : public mixt::Dataset, public mixt::NamedClasses, public mixt::PadsShards {
 public:
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

const mixt::Option<std::string> kRoot{"root", kDefaultRoot, "directory with the IDX .gz files"};
const mixt::Contextual<std::string> kSplit{"split", "train for data.train, test for data.val",
                                           "train: 60k images; test: 10k", mixt::one_of({"train", "test"})};
const mixt::Option<std::int64_t> kBatchSize{"batch_size", 64, "samples per batch", mixt::at_least(1)};
const mixt::Contextual<bool> kShuffle{"shuffle", "true for train", "reshuffle every epoch (seed + epoch)"};
const mixt::Option<bool> kDropLast{"drop_last", false, "drop the last incomplete batch"};
const mixt::Option<std::int64_t> kLimit{"limit", 0, "use only the first N samples (0 = all)", mixt::at_least(0)};
const mixt::Option<bool> kNormalize{"normalize", true, "subtract mean, divide by std"};
// The training set's mean and standard deviation of pixel values in [0, 1].
const mixt::Option<double> kMean{"mean", 0.2860, "pixel mean (of [0,1] values)"};
const mixt::Option<double> kStd{"std", 0.3530, "pixel standard deviation", mixt::above(0)};

std::unique_ptr<mixt::Dataset> make_fashion_mnist(const mixt::Config& c, const mixt::DatasetContext& context) {
  const std::string root = kRoot.read(c);
  const std::string split = kSplit.read(c, context.split == "train" ? "train" : "test");
  const std::int64_t batch_size = kBatchSize.read(c);
  const bool shuffle = kShuffle.read(c, split == "train");
  const bool drop_last = kDropLast.read(c);
  const std::int64_t limit = kLimit.read(c);
  const bool normalize = kNormalize.read(c);
  const double mean = kMean.read(c);
  const double std = kStd.read(c);
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
  if (limit > 0 && limit < images.size(0)) {
    images = images.slice(0, 0, limit).contiguous();
    labels = labels.slice(0, 0, limit).contiguous();
  }
  return std::make_unique<FashionMnist>(images, labels, batch_size, shuffle, drop_last, normalize, mean, std, context);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset("fashion_mnist",
                        {"Fashion-MNIST 28x28 grey images, 10 classes (IDX .gz files)",
                         {kRoot, kSplit, kBatchSize, kShuffle, kDropLast, kLimit, kNormalize, kMean, kStd}},
                        make_fashion_mnist);
}

}  // namespace

MIXT_PLUGIN("fashion_mnist", "1.0.0", register_components)
