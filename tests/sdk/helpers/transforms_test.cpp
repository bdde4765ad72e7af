// mixt's image transforms against torchvision 0.26. Golden values: tests/golden/transforms.json,
// made by tests/golden/make_transforms_golden.py.
//
// Interpolation: mixt resizes with ATen's antialiased bilinear kernel, the one torchvision
// uses for tensors, so against torchvision's tensor path the result is the same up to float
// rounding. Against the PIL path (the classic ImageFolder pipeline) PIL's own bilinear
// filter rounds differently: pixels may differ by one grey level (1/255/std ~ 0.0175 after
// normalisation), and on average by far less.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mixt/helpers/transforms.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "configured_paths.h"
#include "expect_error.h"
#include "recipe/recipe_loader.h"

using ::testing::HasSubstr;

namespace mixt {
namespace {

nlohmann::json golden() {
  std::ifstream in(testing::configured::source_dir() + "/tests/golden/transforms.json");
  return nlohmann::json::parse(in);
}

// A pipeline read from YAML the way a dataset plugin reads it.
TransformPipeline pipeline_from(const std::string& yaml) {
  static std::vector<RecipeNodePtr> keep_alive;
  keep_alive.push_back(parse_yaml("data: {" + yaml + "}", "test.yaml"));
  return read_transforms(Config(keep_alive.back(), "").section("data"), "transforms", TransformPipeline{});
}

std::string error_of(const std::string& yaml) {
  try {
    pipeline_from(yaml);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  return "(no error)";
}

TEST(Transforms, EvalPipelineMatchesTorchvision) {
  const auto g = golden();
  const TransformPipeline eval = pipeline_from(
      "transforms: [{name: resize, size: 32}, {name: center_crop, size: 28}, to_tensor, normalize]");
  for (const auto& c : g["eval_pipeline"]) {
    const std::int64_t h = c["height"], w = c["width"];
    const auto pixels = c["pixels"].get<std::vector<std::uint8_t>>();
    const at::Tensor image = at::tensor(at::ArrayRef<std::uint8_t>(pixels)).view({h, w, 3});
    SampleRng rng(0);
    const at::Tensor ours = eval(image, rng);
    ASSERT_EQ(ours.sizes(), (std::vector<std::int64_t>{3, 28, 28}));
    const at::Tensor tensor_path = at::tensor(c["tensor"].get<std::vector<float>>()).view({3, 28, 28});
    const at::Tensor pil_path = at::tensor(c["pil"].get<std::vector<float>>()).view({3, 28, 28});
    // Same kernel as torchvision on tensors: equal up to float rounding.
    EXPECT_LT((ours - tensor_path).abs().max().item<double>(), 1e-4) << h << "x" << w;
    // PIL's bilinear: at most one grey level apart, almost always equal.
    const double level = 1.0 / 255.0 / 0.224;
    EXPECT_LE((ours - pil_path).abs().max().item<double>(), level * 1.01) << h << "x" << w;
    EXPECT_LT((ours - pil_path).abs().mean().item<double>(), 0.01 * level) << h << "x" << w;
  }
}

TEST(Transforms, RandomResizedCropBoxesHaveTorchvisionsStatistics) {
  const auto g = golden();
  for (const auto& s : g["random_resized_crop"]) {
    const std::int64_t h = s["height"], w = s["width"], draws = s["draws"];
    std::vector<double> areas, log_ratios;
    for (std::int64_t i = 0; i < draws; ++i) {
      SampleRng rng = SampleRng::for_sample(0, 0, static_cast<std::uint64_t>(i));
      const CropBox box = random_resized_crop_box(h, w, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, rng);
      ASSERT_GE(box.top, 0);
      ASSERT_GE(box.left, 0);
      ASSERT_LE(box.top + box.height, h);
      ASSERT_LE(box.left + box.width, w);
      areas.push_back(double(box.height * box.width) / double(h * w));
      log_ratios.push_back(std::log(double(box.width) / double(box.height)));
    }
    const at::Tensor a = at::tensor(areas), r = at::tensor(log_ratios);
    const std::string shape = std::to_string(h) + "x" + std::to_string(w);
    // Means and spreads within sampling noise of torchvision's (20,000 draws each).
    EXPECT_NEAR(a.mean().item<double>(), s["area_mean"].get<double>(), 0.01) << shape;
    EXPECT_NEAR(a.std().item<double>(), s["area_std"].get<double>(), 0.01) << shape;
    EXPECT_NEAR(r.mean().item<double>(), s["log_ratio_mean"].get<double>(), 0.01) << shape;
    EXPECT_NEAR(r.std().item<double>(), s["log_ratio_std"].get<double>(), 0.01) << shape;
    // Ranges: area in [0.08, 1] and ratio in [3/4, 4/3] up to the rounding of the box to pixels.
    EXPECT_NEAR(a.min().item<double>(), s["area_min"].get<double>(), 0.005) << shape;
    EXPECT_NEAR(a.max().item<double>(), s["area_max"].get<double>(), 0.01) << shape;
    EXPECT_NEAR(r.min().item<double>(), s["log_ratio_min"].get<double>(), 0.02) << shape;
    EXPECT_NEAR(r.max().item<double>(), s["log_ratio_max"].get<double>(), 0.02) << shape;
  }
}

TEST(Transforms, RandomResizedCropFallsBackToTheCenterCrop) {
  // 10 x 1000 admits no box with ratio <= 4/3 of area >= 8%: every draw fails, and the
  // fallback is the 10 x round(10 * 4/3) = 10 x 13 box in the middle.
  SampleRng rng(1);
  const CropBox box = random_resized_crop_box(10, 1000, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, rng);
  EXPECT_EQ(box.height, 10);
  EXPECT_EQ(box.width, 13);
  EXPECT_EQ(box.top, 0);
  EXPECT_EQ(box.left, (1000 - 13) / 2);
}

TEST(Transforms, PresetsGiveTheStandardImagenetShapes) {
  for (const char* preset : {"imagenet_train", "imagenet_eval"}) {
    const TransformPipeline p = pipeline_from(std::string("transforms: ") + preset);
    EXPECT_EQ(p.output_shape(350, 400, 3), (std::vector<std::int64_t>{3, 224, 224})) << preset;
    EXPECT_TRUE(p.has_fixed_output_size(3));
  }
  EXPECT_EQ(imagenet_eval_pipeline().describe(), "resize(256) -> center_crop(224x224) -> to_tensor -> normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])");
  const TransformPipeline small = pipeline_from("transforms: {name: imagenet_eval, size: 112}");
  EXPECT_EQ(small.describe(), "resize(128) -> center_crop(112x112) -> to_tensor -> normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])");
}

TEST(Transforms, ToTensorScalesAndCanLayOutChannelsLast) {
  const at::Tensor image = at::arange(2 * 3 * 3, at::kByte).view({2, 3, 3});
  SampleRng rng(0);
  const at::Tensor planar = pipeline_from("transforms: [to_tensor]")(image, rng);
  const at::Tensor nhwc = pipeline_from("transforms: [{name: to_tensor, channels_last: true}]")(image, rng);
  EXPECT_TRUE(planar.is_contiguous());
  EXPECT_EQ(nhwc.stride(0), 1);  // channels innermost in memory
  EXPECT_TRUE(at::allclose(planar, nhwc));
  EXPECT_TRUE(at::allclose(planar, image.permute({2, 0, 1}).to(at::kFloat) / 255.0));
}

TEST(Transforms, FlipAndJitterFollowTheirProbabilitiesAndRanges) {
  const at::Tensor image = at::arange(4 * 5 * 3, at::kByte).view({4, 5, 3});
  SampleRng rng(3);
  EXPECT_TRUE(at::equal(make_random_horizontal_flip(1.0)->apply(image, rng), image.flip({1})));
  EXPECT_TRUE(at::equal(make_random_horizontal_flip(0.0)->apply(image, rng), image));
  int flipped = 0;
  const auto half = make_random_horizontal_flip(0.5);
  for (int i = 0; i < 2000; ++i) flipped += !at::equal(half->apply(image, rng), image);
  EXPECT_NEAR(flipped / 2000.0, 0.5, 0.05);
  // Brightness only, on a flat grey 100: the result is 100 * f with f in [0.5, 1.5].
  const auto jitter = make_color_jitter({0.5, 1.5}, {1, 1}, {1, 1});
  const at::Tensor grey = at::full({4, 4, 3}, 100, at::kByte);
  double low = 255, high = 0;
  for (int i = 0; i < 500; ++i) {
    const double v = jitter->apply(grey, rng)[0][0][0].item<double>();
    low = std::min(low, v);
    high = std::max(high, v);
  }
  EXPECT_GE(low, 50);
  EXPECT_LE(high, 150);
  EXPECT_LT(low, 60);
  EXPECT_GT(high, 140);
}

TEST(Transforms, ColorJitterAdjustmentsMatchTorchvision) {
  // One adjustment at a time with a fixed factor ([f, f]), so torchvision's random order
  // and draws do not enter: uint8 in, uint8 out, truncation as torchvision's.
  const auto g = golden()["color_jitter"];
  const std::int64_t h = g["height"], w = g["width"];
  const auto pixels = g["pixels"].get<std::vector<std::uint8_t>>();
  const at::Tensor image = at::tensor(at::ArrayRef<std::uint8_t>(pixels)).view({h, w, 3});
  for (const char* property : {"brightness", "contrast", "saturation"}) {
    const double f = g[property]["factor"];
    const std::string factor = std::to_string(f);
    const TransformPipeline jitter = pipeline_from(std::string("transforms: [{name: color_jitter, ") + property +
                                                   ": [" + factor + ", " + factor + "]}, to_tensor]");
    SampleRng rng(0);
    const at::Tensor ours = (jitter(image, rng) * 255.0).round().permute({1, 2, 0});
    const auto expected_values = g[property]["hwc"].get<std::vector<std::uint8_t>>();
    const at::Tensor expected = at::tensor(at::ArrayRef<std::uint8_t>(expected_values)).view({h, w, 3}).to(at::kFloat);
    // Float rounding before truncation may flip a pixel by one level, rarely.
    EXPECT_LE((ours - expected).abs().max().item<double>(), 1.0) << property;
    EXPECT_LT((ours - expected).abs().mean().item<double>(), 0.02) << property;
    EXPECT_FALSE(at::equal(ours, image.to(at::kFloat))) << property << " changed nothing";
  }
}

TEST(Transforms, AMisspeltTransformIsOfferedTheRightName) {
  const Error e = testing::thrown_error([&] {
    pipeline_from("transforms: [{name: rezise, size: 3}, to_tensor]");
  });
  EXPECT_EQ(e.hint().rfind("did you mean 'resize'? known: random_resized_crop, resize,", 0), 0u) << e.hint();
}

TEST(Transforms, RecipeMistakesAreErrorsAtTheItem) {
  EXPECT_THAT(error_of("transforms: [{name: resise, size: 3}, to_tensor]"), HasSubstr("test.yaml:1:"));
  EXPECT_THAT(error_of("transforms: [{name: resise, size: 3}, to_tensor]"), HasSubstr("data.transforms[0].name: unknown transform 'resise'"));
  EXPECT_THAT(error_of("transforms: [normalize, to_tensor]"), HasSubstr("normalize must come after to_tensor"));
  EXPECT_THAT(error_of("transforms: [to_tensor, random_horizontal_flip]"), HasSubstr("must come before to_tensor"));
  EXPECT_THAT(error_of("transforms: [to_tensor, to_tensor]"), HasSubstr("data.transforms[1].name: to_tensor is already in"));
  EXPECT_THAT(error_of("transforms: [{name: resize, size: 8}]"), HasSubstr("never make a tensor"));
  EXPECT_THAT(error_of("transforms: [imagenet_train, to_tensor]"), HasSubstr("must be the only item"));
  EXPECT_THAT(error_of("transforms: [{name: resize}, to_tensor]"), HasSubstr("data.transforms[0].size: missing required option"));
  const std::string shorthand = error_of("transforms: [{center_crop: 28}, to_tensor]");
  EXPECT_THAT(shorthand, HasSubstr("data.transforms[0].center_crop: a transform with options is a map with a name"))
      << shorthand;
}

TEST(Transforms, UnknownKeysInsideAnItemAreReported) {
  const RecipeNodePtr root =
      parse_yaml("data: {transforms: [{name: resize, size: 8, sise: 3}, to_tensor]}", "test.yaml");
  read_transforms(Config(root, "").section("data"), "transforms", TransformPipeline{});
  SCOPED_TRACE(::testing::Message() << "expected an unknown-key error");
  const Error e = testing::thrown_error([&] {
    check_unknown_keys(*root);
  });
  EXPECT_THAT(e.what(), HasSubstr("unknown key 'sise'"));
}

}  // namespace
}  // namespace mixt
