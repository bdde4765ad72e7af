#include "preprocessing.h"

#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

namespace {

const std::vector<double> kImageNetMean{0.485, 0.456, 0.406};
const std::vector<double> kImageNetStd{0.229, 0.224, 0.225};

std::int64_t integer(const nlohmann::json& item, const char* key, std::int64_t fallback) {
  const auto it = item.find(key);
  return it == item.end() ? fallback : static_cast<std::int64_t>(it->get<double>());
}

std::vector<double> numbers(const nlohmann::json& item, const char* key, const std::vector<double>& fallback) {
  const auto it = item.find(key);
  return it == item.end() ? fallback : it->get<std::vector<double>>();
}

// imagenet_eval at crop size S: resize(S * 256 / 224), center_crop(S), to_tensor, normalize.
std::vector<Step> imagenet_eval(std::int64_t size) {
  return {{Step::Kind::resize, size * 256 / 224, 0, {}, {}},
          {Step::Kind::center_crop, size, size, {}, {}},
          {Step::Kind::to_tensor, 0, 0, {}, {}},
          {Step::Kind::normalize, 0, 0, kImageNetMean, kImageNetStd}};
}

void add_item(std::vector<Step>& pipeline, const nlohmann::json& item, const std::string& where) {
  const nlohmann::json spec = item.is_string() ? nlohmann::json{{"name", item}} : item;
  const std::string name = spec.value("name", "");
  if (name == "imagenet_eval") {
    pipeline = imagenet_eval(integer(spec, "size", 224));
  } else if (name == "resize") {
    pipeline.push_back({Step::Kind::resize, integer(spec, "size", 0), 0, {}, {}});
  } else if (name == "center_crop") {
    const nlohmann::json& size = spec.at("size");
    const std::int64_t h = static_cast<std::int64_t>((size.is_array() ? size[0] : size).get<double>());
    const std::int64_t w = static_cast<std::int64_t>((size.is_array() ? size[1] : size).get<double>());
    pipeline.push_back({Step::Kind::center_crop, h, w, {}, {}});
  } else if (name == "to_tensor") {  // channels_last is a memory layout: the values are the same
    pipeline.push_back({Step::Kind::to_tensor, 0, 0, {}, {}});
  } else if (name == "normalize") {
    pipeline.push_back(
        {Step::Kind::normalize, 0, 0, numbers(spec, "mean", kImageNetMean), numbers(spec, "std", kImageNetStd)});
  } else if (name == "imagenet_train" || name.rfind("random_", 0) == 0 || name == "color_jitter") {
    throw std::runtime_error(where + " has '" + name +
                             "', a random training augmentation: inference needs the evaluation transforms "
                             "(export from a recipe whose data.val states them)");
  } else {
    throw std::runtime_error(where + " has a transform this program does not know: '" + item.dump() + "'");
  }
}

}  // namespace

std::vector<Step> read_pipeline(const nlohmann::json& transforms, const std::string& data_section) {
  const std::string where =
      (data_section.empty() ? std::string("the file's preprocessing") : data_section) + ".transforms";
  if (transforms.is_null()) {
    throw std::runtime_error("the file states no preprocessing (exported from a recipe without a data section)");
  }
  if (transforms.is_string() && transforms.get<std::string>() == "the dataset's evaluation default") {
    throw std::runtime_error(where + " was left to the dataset's default, which the file does not spell out: " +
                             "state it in the recipe (e.g. transforms: imagenet_eval) and export again");
  }
  std::vector<Step> pipeline;
  if (transforms.is_array()) {
    for (const nlohmann::json& item : transforms) add_item(pipeline, item, where);
  } else {
    add_item(pipeline, transforms, where);
  }
  if (pipeline.empty() || pipeline.back().kind == Step::Kind::resize ||
      pipeline.back().kind == Step::Kind::center_crop) {
    throw std::runtime_error(where + " never makes a tensor (no to_tensor)");
  }
  return pipeline;
}

std::string describe(const std::vector<Step>& pipeline) {
  std::string text;
  for (const Step& step : pipeline) {
    if (!text.empty()) text += " -> ";
    switch (step.kind) {
      case Step::Kind::resize:
        text += "resize(" + std::to_string(step.height) + ")";
        break;
      case Step::Kind::center_crop:
        text += "center_crop(" + std::to_string(step.height) + "x" + std::to_string(step.width) + ")";
        break;
      case Step::Kind::to_tensor:
        text += "to_tensor";
        break;
      case Step::Kind::normalize:
        text += "normalize";
        break;
    }
  }
  return text;
}

torch::Tensor decode_image(const std::string& path, std::int64_t channels) {
  if (channels != 1 && channels != 3) {
    throw std::runtime_error("the model takes " + std::to_string(channels) + " channels: images have 1 or 3");
  }
  const int flags = (channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR) | cv::IMREAD_IGNORE_ORIENTATION;
  const cv::Mat decoded = cv::imread(path, flags);
  if (decoded.empty()) throw std::runtime_error(path + ": cannot read it as an image");
  torch::Tensor image = torch::empty({decoded.rows, decoded.cols, channels}, torch::kUInt8);
  cv::Mat into(decoded.rows, decoded.cols, channels == 1 ? CV_8UC1 : CV_8UC3, image.data_ptr<std::uint8_t>());
  if (channels == 1) {
    decoded.copyTo(into);
  } else {
    cv::cvtColor(decoded, into, cv::COLOR_BGR2RGB);  // OpenCV decodes BGR; the models take RGB
  }
  return image;
}

namespace {

// Bilinear with antialiasing on uint8, as torchvision's resize on tensors (and mixt): the
// H x W x C image viewed as a channels_last 1 x C x H x W batch.
torch::Tensor resize(const torch::Tensor& image, std::int64_t shorter) {
  const std::int64_t h = image.size(0), w = image.size(1);
  // The longer side keeps the aspect ratio, truncated as Python's int() does.
  const std::int64_t out_h = h <= w ? shorter : static_cast<std::int64_t>(double(shorter) * h / w);
  const std::int64_t out_w = h <= w ? static_cast<std::int64_t>(double(shorter) * w / h) : shorter;
  if (out_h == h && out_w == w) return image;
  const torch::Tensor nchw = image.permute({2, 0, 1}).unsqueeze(0).contiguous(torch::MemoryFormat::ChannelsLast);
  return at::_upsample_bilinear2d_aa(nchw, {out_h, out_w}, /*align_corners=*/false).squeeze(0).permute({1, 2, 0});
}

// torchvision's center_crop: zero padding when the image is smaller, offsets rounded half to even.
torch::Tensor center_crop(torch::Tensor image, std::int64_t crop_h, std::int64_t crop_w) {
  std::int64_t h = image.size(0), w = image.size(1);
  if (crop_h > h || crop_w > w) {
    const std::int64_t left = crop_w > w ? (crop_w - w) / 2 : 0, right = crop_w > w ? (crop_w - w + 1) / 2 : 0;
    const std::int64_t top = crop_h > h ? (crop_h - h) / 2 : 0, bottom = crop_h > h ? (crop_h - h + 1) / 2 : 0;
    image = at::constant_pad_nd(image, {0, 0, left, right, top, bottom}, 0);
    h = image.size(0);
    w = image.size(1);
  }
  const auto top = static_cast<std::int64_t>(std::nearbyint((h - crop_h) / 2.0));
  const auto left = static_cast<std::int64_t>(std::nearbyint((w - crop_w) / 2.0));
  return image.slice(0, top, top + crop_h).slice(1, left, left + crop_w);
}

}  // namespace

torch::Tensor preprocess(const std::vector<Step>& pipeline, torch::Tensor image) {
  for (const Step& step : pipeline) {
    switch (step.kind) {
      case Step::Kind::resize:
        image = resize(image, step.height);
        break;
      case Step::Kind::center_crop:
        image = center_crop(image, step.height, step.width);
        break;
      case Step::Kind::to_tensor:
        image = image.permute({2, 0, 1}).contiguous().to(torch::kFloat).mul_(1.0 / 255.0);
        break;
      case Step::Kind::normalize:
        if (static_cast<std::size_t>(image.size(0)) != step.mean.size()) {
          throw std::runtime_error("normalize has " + std::to_string(step.mean.size()) + " means for " +
                                   std::to_string(image.size(0)) + " channels");
        }
        // x * (1/std) + (-mean/std), per channel: the same arithmetic as mixt's, to the last bit.
        for (std::size_t c = 0; c < step.mean.size(); ++c) {
          image.select(0, static_cast<std::int64_t>(c)).mul_(1.0 / step.std[c]).add_(-step.mean[c] / step.std[c]);
        }
        break;
    }
  }
  return image;
}
