// datasets/shapes — synthetic semantic segmentation: images of rectangles, ellipses and
// triangles in random colours on a noisy background, with the mask of which shape covers
// each pixel (0 background, 1 rectangle, 2 ellipse, 3 triangle; a later shape hides an
// earlier one). A segmentation model learns it in minutes on a CPU, so a recipe can show
// the whole path — train, mIoU, per-class IoU, export — without a dataset to download.
//
// Sample i of a split is drawn from its own generator (the seed, the split and i), so the
// data is the same whatever the rank count; the train split is served in an order shuffled
// per epoch, the val split in order. Sharded as torch's DistributedSampler shards.
#include <ATen/CPUGeneratorImpl.h>
#include <mixt/dataset.h>
#include <mixt/options.h>
#include <mixt/padded_shards.h>
#include <mixt/plugin.h>

#include <string>
#include <vector>

namespace {

constexpr std::int64_t kClasses = 4;

double uniform(at::Generator& generator, double low, double high) {
  return low + (high - low) * at::rand({1}, generator, at::kDouble).item<double>();
}

// One image [3, size, size] (values about mean 0, std 1) and its mask [size, size] (int64).
std::pair<at::Tensor, at::Tensor> draw_sample(std::uint64_t seed, std::int64_t size, std::int64_t max_shapes) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor axis = at::arange(size, at::kFloat) + 0.5f;
  const at::Tensor y = axis.view({-1, 1}).expand({size, size});
  const at::Tensor x = axis.view({1, -1}).expand({size, size});
  at::Tensor image = at::rand({3, 1, 1}, generator, at::kFloat).expand({3, size, size}).clone();
  at::Tensor mask = at::zeros({size, size}, at::kLong);
  const auto shapes = static_cast<std::int64_t>(uniform(generator, 1, static_cast<double>(max_shapes) + 1));
  const double s = static_cast<double>(size);
  for (std::int64_t k = 0; k < shapes; ++k) {
    const auto kind = static_cast<std::int64_t>(uniform(generator, 1, kClasses));  // 1, 2 or 3
    const double cx = uniform(generator, 0.15 * s, 0.85 * s), cy = uniform(generator, 0.15 * s, 0.85 * s);
    const double w = uniform(generator, 0.08 * s, 0.3 * s), h = uniform(generator, 0.08 * s, 0.3 * s);
    at::Tensor inside;
    if (kind == 1) {
      inside = (x - cx).abs().le(w) & (y - cy).abs().le(h);
    } else if (kind == 2) {
      inside = ((x - cx) / w).square() + ((y - cy) / h).square() <= 1.0;
    } else {  // apex at the top: below it, and within the sides that widen to 2w at the base
      const at::Tensor depth = (y - (cy - h)) / (2 * h);
      inside = depth.ge(0) & depth.le(1) & (x - cx).abs().le(depth * w);
    }
    const at::Tensor colour = at::rand({3, 1, 1}, generator, at::kFloat).expand({3, size, size});
    image = at::where(inside.unsqueeze(0), colour, image);
    mask.masked_fill_(inside, kind);
  }
  image = image + 0.05 * at::randn({3, size, size}, generator, at::kFloat);
  return {(image - 0.5f) / 0.3f, mask};
}

class Shapes : public mixt::Dataset, public mixt::NamedClasses, public mixt::PadsShards {
 public:
  Shapes(at::Tensor images, at::Tensor masks, std::int64_t own, std::int64_t batch_size, bool shuffle,
         std::uint64_t seed, at::Device device)
      : images_(std::move(images)),
        masks_(std::move(masks)),
        own_(own),
        batch_size_(batch_size),
        shuffle_(shuffle),
        seed_(seed),
        device_(device) {}

  std::int64_t size() const override { return images_.size(0); }
  std::int64_t num_classes() const override { return kClasses; }
  std::vector<std::int64_t> sample_shape() const override { return images_.sizes().slice(1).vec(); }
  std::int64_t batches_per_epoch() const override { return (size() + batch_size_ - 1) / batch_size_; }
  void start_epoch(std::int64_t epoch) override {
    next_ = 0;
    order_ = at::arange(size(), at::kLong);
    if (shuffle_) {
      auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_ * 7919 + static_cast<std::uint64_t>(epoch));
      order_ = at::randperm(size(), generator, at::kLong);
    }
  }
  std::optional<mixt::Batch> next_batch() override {
    if (!order_.defined()) start_epoch(0);
    if (next_ >= size()) return std::nullopt;
    const at::Tensor rows = order_.narrow(0, next_, std::min(batch_size_, size() - next_));
    next_ += rows.size(0);
    return mixt::Batch{images_.index_select(0, rows).to(device_), masks_.index_select(0, rows).to(device_)};
  }
  mixt::DatasetCapabilities capabilities() override {
    mixt::DatasetCapabilities can;
    can.named_classes = this;
    can.pads_shards = this;
    return can;
  }
  std::vector<std::string> class_names() const override { return {"background", "rectangle", "ellipse", "triangle"}; }
  std::int64_t own_samples() const override { return own_; }

 private:
  at::Tensor images_, masks_;  // this rank's shard, on the CPU
  std::int64_t own_, batch_size_;
  bool shuffle_;
  std::uint64_t seed_;
  at::Device device_;
  at::Tensor order_;
  std::int64_t next_ = 0;
};

struct ShapesOptions {
  std::int64_t size = 2000;
  std::int64_t image_size = 64;
  std::int64_t max_shapes = 3;
  std::int64_t batch_size = 32;
  std::optional<bool> shuffle;  // train: yes; val: no
};

using O = ShapesOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::size, "size", "images in the split (split across ranks)", mixt::between(1, 1'000'000))
        .add(&O::image_size, "image_size", "height and width of each image", mixt::between(8, 1024))
        .add(&O::max_shapes, "max_shapes", "shapes per image: 1 to this many", mixt::between(1, 16))
        .add(&O::batch_size, "batch_size", "images per batch", mixt::at_least(1))
        .contextual(&O::shuffle, "shuffle", "true for data.train, false otherwise", "a new order every epoch");

std::unique_ptr<mixt::Dataset> make_shapes(const O& o, const mixt::DatasetContext& context) {
  // Each split draws its own images: val is not train again.
  std::uint64_t split_seed = context.seed * 1000003;
  for (unsigned char c : context.split) split_seed = split_seed * 131 + c;
  const std::int64_t shard = (o.size + context.world_size - 1) / context.world_size;
  std::vector<at::Tensor> images, masks;
  for (std::int64_t i = 0; i < shard; ++i) {
    // DistributedSampler's interleaving, the positions past the end wrapping to the start.
    const std::int64_t index = (context.rank + i * context.world_size) % o.size;
    auto [image, mask] =
        draw_sample(split_seed * 65537 + static_cast<std::uint64_t>(index), o.image_size, o.max_shapes);
    images.push_back(image);
    masks.push_back(mask);
  }
  return std::make_unique<Shapes>(at::stack(images), at::stack(masks),
                                  mixt::distributed_sampler_own_samples(o.size, context.rank, context.world_size),
                                  o.batch_size, o.shuffle.value_or(context.split == "train"), context.seed,
                                  context.device);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset("shapes",
                        "synthetic segmentation: rectangles, ellipses and triangles on noise, with per-pixel masks "
                        "(4 classes)",
                        kOptions, make_shapes);
}

}  // namespace

MIXT_PLUGIN("dataset_shapes", "1.0.0", register_components)
