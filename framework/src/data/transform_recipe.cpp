// Reading `transforms:` from a dataset's recipe section (see mixt/helpers/transforms.h).
#include "mixt/helpers/transforms.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "mixt/options.h"
#include "common/closest_match.h"

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

std::optional<std::string> low_high(const std::vector<double>& v) {
  if (v.size() == 2 && v[0] > 0 && v[0] <= v[1]) return std::nullopt;
  return "expected [low, high] with 0 < low <= high";
}

// Each transform's options, declared once for the reader and for transform_option_docs().
struct Declarations {
  const Option<std::int64_t> preset_size{"size", 224, "crop size", above(0)};
  const Option<bool> channels_last{"channels_last", false, "channels_last tensors"};
  const Required<std::int64_t> crop_size{"size", "an integer or [height, width]"};
  const Option<std::vector<double>> scale{"scale", {0.08, 1.0}, "area range", low_high};
  const Option<std::vector<double>> ratio{"ratio", {3.0 / 4.0, 4.0 / 3.0}, "aspect ratio range", low_high};
  const Required<std::int64_t> resize_size{"size", "the shorter side", above(0)};
  const Option<double> flip_p{"p", 0.5, "probability", between(0, 1)};
  // torchvision's ColorJitter argument: x >= 0 means [max(0, 1 - x), 1 + x]; [low, high] as is.
  const Option<double> brightness{"brightness", 0.0, "x or [low, high]", at_least(0)};
  const Option<double> contrast{"contrast", 0.0, "x or [low, high]", at_least(0)};
  const Option<double> saturation{"saturation", 0.0, "x or [low, high]", at_least(0)};
  const Option<std::vector<double>> mean{"mean", kImageNetMean, "ImageNet's"};
  const Option<std::vector<double>> std{"std", kImageNetStd, "ImageNet's"};
};

const Declarations& declarations() {
  static const Declarations declared;
  return declared;
}

// `size: 224` or `size: [224, 192]` (height, width).
std::array<std::int64_t, 2> read_size(const Config& c) {
  const std::string& key = declarations().crop_size.name();
  std::vector<std::int64_t> size;
  try {
    size = c.integers(key, {});
  } catch (const Error&) {  // not a list: a single integer
    size = {c.integer(key)};
  }
  if (size.empty()) size = {declarations().crop_size.read(c)};  // missing: the required-option error
  if (size.size() == 1) size.push_back(size[0]);
  if (size.size() != 2 || size[0] < 1 || size[1] < 1) c.fail(key, "expected a positive size or [height, width]");
  return {size[0], size[1]};
}

std::array<double, 2> read_range(const Config& c, const Option<std::vector<double>>& option) {
  const std::vector<double> v = option.read(c);
  return {v[0], v[1]};
}

std::array<double, 2> read_jitter(const Config& c, const Option<double>& option) {
  const auto around_one = [](double x) { return std::array<double, 2>{std::max(0.0, 1 - x), 1 + x}; };
  const std::string& key = option.name();
  if (!c.has(key)) return around_one(option.fallback());
  std::vector<double> range;
  try {
    range = c.numbers(key, {});
  } catch (const Error&) {  // not a list: a single number
    return around_one(option.read(c));
  }
  if (range.empty()) return {1.0, 1.0};
  if (range.size() != 2 || range[0] < 0 || range[0] > range[1]) {
    c.fail(key, "expected x >= 0 or [low, high] with 0 <= low <= high");
  }
  return {range[0], range[1]};
}

void add_item(TransformPipeline& pipeline, const Config& item) {
  const Declarations& k = declarations();
  const std::string name = item.string("name");
  if (name == "imagenet_train" || name == "imagenet_eval") {
    const std::int64_t size = k.preset_size.read(item);
    const bool channels_last = k.channels_last.read(item);
    pipeline = name == "imagenet_train" ? imagenet_train_pipeline(size, channels_last)
                                        : imagenet_eval_pipeline(size, channels_last);
  } else if (name == "random_resized_crop") {
    const auto size = read_size(item);
    pipeline.add(make_random_resized_crop(size[0], size[1], read_range(item, k.scale), read_range(item, k.ratio)));
  } else if (name == "resize") {
    pipeline.add(make_resize(k.resize_size.read(item)));
  } else if (name == "center_crop") {
    const auto size = read_size(item);
    pipeline.add(make_center_crop(size[0], size[1]));
  } else if (name == "random_horizontal_flip") {
    pipeline.add(make_random_horizontal_flip(k.flip_p.read(item)));
  } else if (name == "color_jitter") {
    pipeline.add(make_color_jitter(read_jitter(item, k.brightness), read_jitter(item, k.contrast),
                                   read_jitter(item, k.saturation)));
  } else if (name == "to_tensor") {
    pipeline.add(make_to_tensor(k.channels_last.read(item)));
  } else if (name == "normalize") {
    const auto mean = k.mean.read(item);
    const auto std = k.std.read(item);
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

// "{size, scale: [0.08, 1.0]}": a transform's options as the help of `transforms` shows them.
std::string options_text(std::initializer_list<OptionDoc> options) {
  std::string text;
  for (const OptionDoc& option : options) {
    text += (text.empty() ? "{" : ", ") + option.name;
    if (!option.default_value.empty()) text += ": " + option.default_value;
  }
  return text + "}";
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

OptionsOf<TransformKeys> transform_keys(const std::string& default_pipeline) {
  const Declarations& k = declarations();
  const OptionDoc doc{
      "transforms", "(below)",
      "default: " + default_pipeline + ". preset name (imagenet_train | imagenet_eval, options " +
          options_text({k.preset_size, k.channels_last}) + ") or an ordered list of: random_resized_crop " +
          options_text({k.crop_size, k.scale, k.ratio}) + ", resize " + options_text({k.resize_size}) +
          " (the shorter side), center_crop " + options_text({k.crop_size}) + ", random_horizontal_flip " +
          options_text({k.flip_p}) + ", color_jitter " + options_text({k.brightness, k.contrast, k.saturation}) +
          " (each x or [low, high]), to_tensor " + options_text({k.channels_last}) + ", normalize " +
          options_text({k.mean, k.std}) + " (ImageNet's)"};
  return OptionsOf<TransformKeys>().read_with({doc}, [](const Config& c, TransformKeys& into) {
    if (c.has("transforms")) into.pipeline = read_transforms(c, "transforms", {});
  });
}

}  // namespace mixt
