// Reading `transforms:` from a dataset's recipe section (see mixt/helpers/transforms.h).
#include "mixt/helpers/transforms.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "recipe/closest_match.h"

namespace mixt {

namespace {

// The transforms a list item can name (besides the presets imagenet_train, imagenet_eval).
constexpr std::array<std::string_view, 7> kTransforms = {"random_resized_crop", "resize", "center_crop",
                                                        "random_horizontal_flip", "color_jitter", "to_tensor",
                                                        "normalize"};

bool is_transform(std::string_view name) {
  return std::find(kTransforms.begin(), kTransforms.end(), name) != kTransforms.end();
}

std::string known_transforms() {
  std::string text;
  for (const std::string_view name : kTransforms) text += std::string(name) + ", ";
  return text + "and the presets imagenet_train, imagenet_eval";
}

// `size: 224` or `size: [224, 192]` (height, width).
std::array<std::int64_t, 2> read_size(const Config& c) {
  std::vector<std::int64_t> size;
  try {
    size = c.integers("size", {});
  } catch (const Error&) {  // not a list: a single integer
    size = {c.integer("size")};
  }
  if (size.empty()) size = {c.integer("size")};  // missing: the required-option error
  if (size.size() == 1) size.push_back(size[0]);
  if (size.size() != 2 || size[0] < 1 || size[1] < 1) c.fail("size", "expected a positive size or [height, width]");
  return {size[0], size[1]};
}

std::array<double, 2> read_range(const Config& c, std::string_view key, std::array<double, 2> fallback) {
  const std::vector<double> v = c.numbers(key, {fallback[0], fallback[1]});
  if (v.size() != 2 || !(v[0] > 0) || v[0] > v[1]) c.fail(key, "expected [low, high] with 0 < low <= high");
  return {v[0], v[1]};
}

// torchvision's ColorJitter argument: x >= 0 means [max(0, 1 - x), 1 + x]; [low, high] as is.
std::array<double, 2> read_jitter(const Config& c, std::string_view key) {
  std::vector<double> range;
  try {
    range = c.numbers(key, {});
  } catch (const Error&) {  // not a list: a single number
    const double x = c.number(key, 0);
    if (x < 0) c.fail(key, "must be >= 0");
    return {std::max(0.0, 1 - x), 1 + x};
  }
  if (range.empty()) return {1.0, 1.0};
  if (range.size() != 2 || range[0] < 0 || range[0] > range[1]) {
    c.fail(key, "expected x >= 0 or [low, high] with 0 <= low <= high");
  }
  return {range[0], range[1]};
}

void add_item(TransformPipeline& pipeline, const Config& item) {
  const std::string name = item.string("name");
  if (name == "imagenet_train" || name == "imagenet_eval") {
    const std::int64_t size = item.integer("size", 224);
    const bool channels_last = item.boolean("channels_last", false);
    if (size < 1) item.fail("size", "must be positive");
    pipeline = name == "imagenet_train" ? imagenet_train_pipeline(size, channels_last)
                                        : imagenet_eval_pipeline(size, channels_last);
  } else if (name == "random_resized_crop") {
    const auto size = read_size(item);
    pipeline.add(make_random_resized_crop(size[0], size[1], read_range(item, "scale", {0.08, 1.0}),
                                          read_range(item, "ratio", {3.0 / 4.0, 4.0 / 3.0})));
  } else if (name == "resize") {
    const std::int64_t size = item.integer("size");
    if (size < 1) item.fail("size", "must be positive");
    pipeline.add(make_resize(size));
  } else if (name == "center_crop") {
    const auto size = read_size(item);
    pipeline.add(make_center_crop(size[0], size[1]));
  } else if (name == "random_horizontal_flip") {
    const double p = item.number("p", 0.5);
    if (p < 0 || p > 1) item.fail("p", "must be in [0, 1]");
    pipeline.add(make_random_horizontal_flip(p));
  } else if (name == "color_jitter") {
    pipeline.add(make_color_jitter(read_jitter(item, "brightness"), read_jitter(item, "contrast"),
                                   read_jitter(item, "saturation")));
  } else if (name == "to_tensor") {
    pipeline.add(make_to_tensor(item.boolean("channels_last", false)));
  } else if (name == "normalize") {
    const auto mean = item.numbers("mean", kImageNetMean);
    const auto std = item.numbers("std", kImageNetStd);
    if (mean.size() != std.size()) item.fail("std", "mean and std must have the same length");
    for (double s : std) {
      if (!(s > 0)) item.fail("std", "every std must be positive");
    }
    pipeline.add(make_normalize(mean, std));
  } else {
    std::vector<std::string> names;
    for (const std::string_view known : kTransforms) names.emplace_back(known);
    names.emplace_back("imagenet_train");
    names.emplace_back("imagenet_eval");
    const auto match = closest_match(name, names);
    item.fail("name", "unknown transform '" + name + "'",
              (match ? "did you mean '" + *match + "'? " : std::string()) + "known: " + known_transforms());
  }
}

}  // namespace

TransformPipeline read_transforms(const Config& section, std::string_view key, TransformPipeline fallback) {
  if (!section.has(key)) return fallback;
  const std::vector<Config> items = section.sections(key);
  if (items.empty()) section.fail(key, "the transform list is empty", "end it with to_tensor (and normalize)");
  TransformPipeline pipeline;
  bool tensor = false;
  for (const Config& item : items) {
    // `{center_crop: 28}`, torchvision's call written as a map, has no name: say how to write it.
    const std::vector<std::string> keys = item.keys();
    if (!item.has("name") && keys.size() == 1 && is_transform(keys[0])) {
      item.fail(keys[0], "a transform with options is a map with a name",
                "write {name: " + keys[0] + ", <option>: <value>}, e.g. {name: center_crop, size: 224}");
    }
    const std::string name = item.string("name");
    const bool preset = name == "imagenet_train" || name == "imagenet_eval";
    if (preset && items.size() > 1) {
      item.fail("name", "a preset is a whole pipeline and must be the only item",
                "write `" + std::string(key) + ": " + name + "`");
    }
    if (!preset) {
      const bool takes = name == "normalize", makes = name == "to_tensor";
      if (takes && !tensor) item.fail("name", "normalize must come after to_tensor");
      if (makes && tensor) item.fail("name", "to_tensor is already in the list: give it once");
      if (!takes && tensor) item.fail("name", name + " must come before to_tensor (it works on the decoded image)");
      tensor = tensor || makes;
    }
    add_item(pipeline, item);
    tensor = tensor || preset;
  }
  if (!tensor) section.fail(key, "the transforms never make a tensor", "add to_tensor (and normalize) at the end");
  return pipeline;
}

std::vector<OptionDoc> transform_option_docs() {
  return {
      {"transforms", "(per dataset)",
       "preset name (imagenet_train | imagenet_eval, options size, channels_last) or an ordered list of: "
       "random_resized_crop {size, scale: [0.08, 1], ratio: [0.75, 1.333]}, resize {size: shorter side}, "
       "center_crop {size}, random_horizontal_flip {p: 0.5}, "
       "color_jitter {brightness, contrast, saturation: x or [low, high]}, "
       "to_tensor {channels_last: false}, normalize {mean, std: ImageNet's}"},
  };
}

}  // namespace mixt
