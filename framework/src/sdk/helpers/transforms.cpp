// The image transforms of mixt/helpers/transforms.h, on H x W x C uint8 tensors (views where a
// transform only selects pixels), following torchvision.transforms.v2 on tensors.
#include "mixt/helpers/transforms.h"
#include "mixt/options.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "mixt/error.h"

namespace mixt {

namespace {

// Python's round(): halves to even. torchvision rounds crop sizes and offsets with it.
std::int64_t python_round(double x) { return static_cast<std::int64_t>(std::nearbyint(x)); }

// Bilinear resize with antialiasing (torchvision's F.resize(antialias=True) on tensors).
// An H x W x C tensor viewed as 1 x C x H x W is channels_last, the layout ATen's fast
// uint8 kernel wants; the result comes back as a contiguous H x W x C tensor.
at::Tensor resize_bilinear(const at::Tensor& image, std::int64_t height, std::int64_t width) {
  if (image.size(0) == height && image.size(1) == width) return image;
  const at::Tensor nchw = image.permute({2, 0, 1}).unsqueeze(0).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor resized = at::_upsample_bilinear2d_aa(nchw, {height, width}, /*align_corners=*/false);
  return resized.squeeze(0).permute({1, 2, 0});
}

at::Tensor crop(const at::Tensor& image, const CropBox& box) {
  return image.slice(0, box.top, box.top + box.height).slice(1, box.left, box.left + box.width);
}

class RandomResizedCrop : public Transform {
 public:
  RandomResizedCrop(std::int64_t h, std::int64_t w, std::array<double, 2> scale, std::array<double, 2> ratio)
      : h_(h), w_(w), scale_(scale), ratio_(ratio) {}
  at::Tensor apply(const at::Tensor& image, SampleRng& rng) const override {
    const CropBox box = random_resized_crop_box(image.size(0), image.size(1), scale_, ratio_, rng);
    return resize_bilinear(crop(image, box), h_, w_);
  }
  std::string describe() const override {
    return "random_resized_crop(" + std::to_string(h_) + "x" + std::to_string(w_) + ")";
  }

 private:
  std::int64_t h_, w_;
  std::array<double, 2> scale_, ratio_;
};

class Resize : public Transform {
 public:
  explicit Resize(std::int64_t size) : size_(size) {}
  at::Tensor apply(const at::Tensor& image, SampleRng&) const override {
    // torchvision: the shorter side becomes `size`, the longer keeps the aspect ratio
    // (truncated, as int() does).
    const std::int64_t h = image.size(0), w = image.size(1);
    if (h <= w) return resize_bilinear(image, size_, static_cast<std::int64_t>(double(size_) * w / h));
    return resize_bilinear(image, static_cast<std::int64_t>(double(size_) * h / w), size_);
  }
  std::string describe() const override { return "resize(" + std::to_string(size_) + ")"; }

 private:
  std::int64_t size_;
};

class CenterCrop : public Transform {
 public:
  CenterCrop(std::int64_t h, std::int64_t w) : h_(h), w_(w) {}
  at::Tensor apply(const at::Tensor& input, SampleRng&) const override {
    at::Tensor image = input;
    std::int64_t h = image.size(0), w = image.size(1);
    if (h_ > h || w_ > w) {  // torchvision pads with zeros when the image is smaller
      const std::int64_t left = w_ > w ? (w_ - w) / 2 : 0, right = w_ > w ? (w_ - w + 1) / 2 : 0;
      const std::int64_t top = h_ > h ? (h_ - h) / 2 : 0, bottom = h_ > h ? (h_ - h + 1) / 2 : 0;
      image = at::constant_pad_nd(image, {0, 0, left, right, top, bottom}, 0);
      h = image.size(0);
      w = image.size(1);
    }
    const CropBox box{python_round((h - h_) / 2.0), python_round((w - w_) / 2.0), h_, w_};
    return crop(image, box);
  }
  std::string describe() const override {
    return "center_crop(" + std::to_string(h_) + "x" + std::to_string(w_) + ")";
  }

 private:
  std::int64_t h_, w_;
};

class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p) : p_(p) {}
  at::Tensor apply(const at::Tensor& image, SampleRng& rng) const override {
    return rng.bernoulli(p_) ? image.flip({1}) : image;
  }
  std::string describe() const override { return "random_horizontal_flip"; }

 private:
  double p_;
};

class ColorJitter : public Transform {
 public:
  ColorJitter(std::array<double, 2> brightness, std::array<double, 2> contrast, std::array<double, 2> saturation)
      : ranges_{brightness, contrast, saturation} {}
  at::Tensor apply(const at::Tensor& image, SampleRng& rng) const override {
    // torchvision draws a random order of the adjustments, then each factor uniformly in
    // its range. Each adjustment blends with a reference image (black, the mean grey, the
    // grey image) and, on uint8, clamps and truncates back to uint8.
    std::array<int, 3> order{0, 1, 2};
    for (int i = 2; i > 0; --i) std::swap(order[i], order[rng.integer(0, i)]);
    const bool is_uint8 = image.scalar_type() == at::kByte;
    const double bound = is_uint8 ? 255.0 : 1.0;
    at::Tensor x = image.to(at::kFloat);
    for (int which : order) {
      const auto [low, high] = ranges_[static_cast<std::size_t>(which)];
      if (low == 1.0 && high == 1.0) continue;
      const double f = rng.uniform(low, high);
      const at::Tensor grey = (x.select(2, 0) * 0.2989 + x.select(2, 1) * 0.587 + x.select(2, 2) * 0.114).unsqueeze(2);
      at::Tensor reference;
      if (which == 0) reference = at::zeros_like(grey);
      if (which == 1) reference = (is_uint8 ? grey.floor() : grey).mean();
      if (which == 2) reference = is_uint8 ? grey.floor() : grey;
      x = (x * f + reference * (1 - f)).clamp_(0, bound);
      if (is_uint8) x = x.floor_();
    }
    return is_uint8 ? x.to(at::kByte) : x;
  }
  std::string describe() const override { return "color_jitter"; }

 private:
  std::array<std::array<double, 2>, 3> ranges_;
};

class ToTensor : public Transform {
 public:
  explicit ToTensor(bool channels_last) : channels_last_(channels_last) {}
  at::Tensor apply(const at::Tensor& image, SampleRng&) const override {
    // One pass: the copy converts to float and lays out the planes; then scale to [0, 1].
    const at::Tensor chw = image.permute({2, 0, 1});
    at::Tensor out = channels_last_
                         ? at::empty({image.size(0), image.size(1), image.size(2)}, at::kFloat).permute({2, 0, 1})
                         : at::empty(chw.sizes(), at::kFloat);
    out.copy_(chw);
    return image.scalar_type() == at::kByte ? out.mul_(1.0 / 255.0) : out;
  }
  bool makes_tensor() const override { return true; }
  std::string describe() const override { return channels_last_ ? "to_tensor(channels_last)" : "to_tensor"; }

 private:
  bool channels_last_;
};

class Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {}
  at::Tensor apply(const at::Tensor& image, SampleRng&) const override {
    const auto channels = static_cast<std::size_t>(image.size(0));
    if (channels != mean_.size()) {
      throw runtime_error("normalize: the image has " + std::to_string(channels) + " channels but mean has " +
                          std::to_string(mean_.size()) + " values");
    }
    // (x - mean) / std as x * (1/std) + (-mean/std): one fused pass per channel.
    for (std::size_t c = 0; c < channels; ++c) {
      image.select(0, static_cast<std::int64_t>(c)).mul_(1.0 / std_[c]).add_(-mean_[c] / std_[c]);
    }
    return image;
  }
  bool takes_tensor() const override { return true; }
  // The values too: a deployer reads them from an exported model's metadata.
  std::string describe() const override {
    return "normalize(mean=" + format_yaml(mean_) + ", std=" + format_yaml(std_) + ")";
  }

 private:
  std::vector<double> mean_, std_;
};

}  // namespace

CropBox random_resized_crop_box(std::int64_t height, std::int64_t width, std::array<double, 2> scale,
                                std::array<double, 2> ratio, SampleRng& rng) {
  const double area = double(height) * double(width);
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(scale[0], scale[1]);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const std::int64_t w = python_round(std::sqrt(target_area * aspect));
    const std::int64_t h = python_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const std::int64_t top = rng.integer(0, height - h);
      const std::int64_t left = rng.integer(0, width - w);
      return {top, left, h, w};
    }
  }
  // Fallback: the largest center crop whose aspect ratio is within `ratio`.
  const double in_ratio = double(width) / double(height);
  std::int64_t w = width, h = height;
  if (in_ratio < std::min(ratio[0], ratio[1])) {
    h = python_round(w / std::min(ratio[0], ratio[1]));
  } else if (in_ratio > std::max(ratio[0], ratio[1])) {
    w = python_round(h * std::max(ratio[0], ratio[1]));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

std::unique_ptr<Transform> make_random_resized_crop(std::int64_t height, std::int64_t width,
                                                    std::array<double, 2> scale, std::array<double, 2> ratio) {
  return std::make_unique<RandomResizedCrop>(height, width, scale, ratio);
}
std::unique_ptr<Transform> make_resize(std::int64_t shorter_side) { return std::make_unique<Resize>(shorter_side); }
std::unique_ptr<Transform> make_center_crop(std::int64_t height, std::int64_t width) {
  return std::make_unique<CenterCrop>(height, width);
}
std::unique_ptr<Transform> make_random_horizontal_flip(double p) { return std::make_unique<RandomHorizontalFlip>(p); }
std::unique_ptr<Transform> make_color_jitter(std::array<double, 2> brightness, std::array<double, 2> contrast,
                                             std::array<double, 2> saturation) {
  return std::make_unique<ColorJitter>(brightness, contrast, saturation);
}
std::unique_ptr<Transform> make_to_tensor(bool channels_last) { return std::make_unique<ToTensor>(channels_last); }
std::unique_ptr<Transform> make_normalize(std::vector<double> mean, std::vector<double> std) {
  return std::make_unique<Normalize>(std::move(mean), std::move(std));
}

void TransformPipeline::add(std::unique_ptr<Transform> transform) { steps_.push_back(std::move(transform)); }

at::Tensor TransformPipeline::operator()(at::Tensor image, SampleRng& rng) const {
  for (const auto& step : steps_) image = step->apply(image, rng);
  return image;
}

std::vector<std::int64_t> TransformPipeline::output_shape(std::int64_t h, std::int64_t w,
                                                          std::int64_t channels) const {
  SampleRng rng(0);
  return (*this)(at::zeros({h, w, channels}, at::kByte), rng).sizes().vec();
}

bool TransformPipeline::has_fixed_output_size(std::int64_t channels) const {
  return output_shape(300, 400, channels) == output_shape(517, 233, channels);
}

std::string TransformPipeline::describe() const {
  std::ostringstream text;
  for (std::size_t i = 0; i < steps_.size(); ++i) text << (i ? " -> " : "") << steps_[i]->describe();
  return text.str();
}

TransformPipeline imagenet_train_pipeline(std::int64_t size, bool channels_last) {
  TransformPipeline p;
  p.add(make_random_resized_crop(size, size));
  p.add(make_random_horizontal_flip(0.5));
  p.add(make_to_tensor(channels_last));
  p.add(make_normalize(kImageNetMean, kImageNetStd));
  return p;
}

TransformPipeline imagenet_eval_pipeline(std::int64_t size, bool channels_last) {
  TransformPipeline p;
  p.add(make_resize(size * 256 / 224));
  p.add(make_center_crop(size, size));
  p.add(make_to_tensor(channels_last));
  p.add(make_normalize(kImageNetMean, kImageNetStd));
  return p;
}

}  // namespace mixt
