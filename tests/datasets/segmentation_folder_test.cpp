// The segmentation_folder dataset plugin on Pascal VOC-layout trees written by
// tests/fixtures/data/make_segmentation_folder.py: images whose 16-pixel blocks each have a
// class's colour (grey for 255, ignore), so that the mask is a function of the image's
// pixels; masks as VOC palette PNGs and, in a second tree, as grey PNGs of the same indices.
// The evaluation masks are compared with torchvision's (PIL's nearest-neighbour resize) as
// the script computed them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mixt/helpers/data_loader.h>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "data_support.h"
#include "expect_error.h"

namespace mixt {
namespace {

using testing::BuiltPlugins;
using testing::collect_epoch;
using testing::make_dataset;

class SegmentationFolder : public ::testing::Test {
 protected:
  static fs::path palette() { return testing::fixture_tree("make_segmentation_folder.py"); }
  static fs::path grey() { return testing::fixture_tree("make_segmentation_folder.py", "--grey"); }
  static fs::path bad() { return testing::fixture_tree("make_segmentation_folder.py", "--bad"); }

  static std::string section(const fs::path& root, const std::string& extra) {
    return "{name: segmentation_folder, root: " + root.string() +
           ", classes: [background, red, green, blue, yellow], " + extra + "}";
  }

  BuiltPlugins plugins;
};

const DatasetContext kVal{"val", 0, 0, 1, at::kCPU};

at::Tensor all_targets(Dataset& data, std::int64_t epoch) {
  std::vector<at::Tensor> targets;
  for (const Batch& b : collect_epoch(data, epoch)) targets.push_back(b.targets);
  return at::cat(targets);
}

// The script's eval_32_36.u8: the val masks through torchvision's F.resize(NEAREST), padded
// with 255 to 36 and centre-cropped, as PIL computes them.
at::Tensor expected_eval_masks(const fs::path& root) {
  std::ifstream in(root / "expected/eval_32_36.u8", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return at::from_blob(bytes.data(), {static_cast<std::int64_t>(bytes.size())}, at::kByte)
      .clone()
      .view({-1, 36, 36})
      .to(at::kLong);
}

TEST_F(SegmentationFolder, PaletteAndGreyMasksGiveTorchvisionsEvaluationMasks) {
  const std::string eval = "base_size: 32, crop_size: 36, batch_size: 4, workers: 2";
  auto from_palette = make_dataset(plugins, section(palette(), eval), kVal);
  auto from_grey = make_dataset(plugins, section(grey(), eval), kVal);
  EXPECT_EQ(from_palette->size(), 2);
  EXPECT_EQ(from_palette->num_classes(), 5);
  EXPECT_EQ(from_palette->sample_shape(), (std::vector<std::int64_t>{3, 36, 36}));
  const at::Tensor palette_masks = all_targets(*from_palette, 0);
  EXPECT_EQ(palette_masks.scalar_type(), at::kLong);
  const at::Tensor expected = expected_eval_masks(palette());
  ASSERT_EQ(palette_masks.sizes(), expected.sizes());
  EXPECT_EQ(palette_masks.ne(expected).sum().item<std::int64_t>(), 0);
  EXPECT_TRUE(at::equal(all_targets(*from_grey, 0), palette_masks));
  // 255 passes through: the grey blocks and the padding (one val image is 32 wide once resized).
  EXPECT_GT(palette_masks.eq(255).sum().item<std::int64_t>(), 36 * 4);
  for (std::int64_t c = 0; c < 5; ++c) EXPECT_GT(palette_masks.eq(c).sum().item<std::int64_t>(), 0) << c;
}

// Each pixel's colour names its class: where the mask is uniform over a 5 x 5 window (away
// from block edges, which bilinear resizing blends), the image's nearest class colour is
// the mask's class. A flip, resize or crop applied to one but not the other breaks it.
double aligned_fraction(const Batch& batch, std::int64_t* checked, std::int64_t* padded) {
  const at::Tensor mean = at::tensor({0.485, 0.456, 0.406}, at::kFloat).view({1, 3, 1, 1});
  const at::Tensor std = at::tensor({0.229, 0.224, 0.225}, at::kFloat).view({1, 3, 1, 1});
  const at::Tensor pixels = (batch.inputs * std + mean) * 255;  // [N, 3, H, W]
  const at::Tensor colours =
      at::tensor({0, 0, 0, 230, 30, 30, 30, 230, 30, 30, 30, 230, 230, 230, 30}, at::kFloat).view({5, 1, 3, 1, 1});
  const at::Tensor nearest = (pixels.unsqueeze(0) - colours).square().sum(2).argmin(0);  // [N, H, W]
  const at::Tensor mask = batch.targets.to(at::kFloat).unsqueeze(1);
  const at::Tensor high = at::max_pool2d(mask, {5, 5}, {1, 1}, {2, 2});
  const at::Tensor low = -at::max_pool2d(-mask, {5, 5}, {1, 1}, {2, 2});
  const at::Tensor interior = (high == low).squeeze(1) & batch.targets.ne(255);
  *checked += interior.sum().item<std::int64_t>();
  *padded += (batch.targets.eq(255) & pixels.abs().sum(1).lt(1)).sum().item<std::int64_t>();
  return (nearest.eq(batch.targets) & interior).sum().item<double>() / interior.sum().item<double>();
}

TEST_F(SegmentationFolder, ImageAndMaskStayAlignedThroughTheRandomResizeFlipAndCrop) {
  auto data = make_dataset(plugins, section(palette(), "base_size: 40, crop_size: 40, batch_size: 3, workers: 2"));
  EXPECT_EQ(data->size(), 6);
  std::int64_t checked = 0, padded = 0;
  double lowest = 1, highest_flipped = 0;
  std::vector<at::Tensor> epochs;
  for (std::int64_t epoch = 0; epoch < 6; ++epoch) {
    std::vector<at::Tensor> masks;
    for (const Batch& b : collect_epoch(*data, epoch)) {
      ASSERT_EQ(b.inputs.sizes(), (std::vector<std::int64_t>{3, 3, 40, 40}));
      ASSERT_EQ(b.targets.sizes(), (std::vector<std::int64_t>{3, 40, 40}));
      const double aligned = aligned_fraction(b, &checked, &padded);
      EXPECT_GE(aligned, 0.995);
      lowest = std::min(lowest, aligned);
      // The control: the same masks flipped alone no longer fit their images.
      std::int64_t unused = 0;
      highest_flipped = std::max(highest_flipped, aligned_fraction({b.inputs, b.targets.flip({2})}, &unused, &unused));
      masks.push_back(b.targets);
    }
    epochs.push_back(at::cat(masks));
  }
  EXPECT_LT(highest_flipped, 0.8);
  std::cout << "[ measured ] aligned pixels: at least " << lowest << " per batch (" << checked
            << " checked); with the masks flipped alone at most " << highest_flipped << "\n";
  EXPECT_GT(checked, 6 * 6 * 40 * 40 / 4);
  EXPECT_GT(padded, 0);                           // some draws resize below the crop: padded with 255, image 0
  EXPECT_FALSE(at::equal(epochs[0], epochs[1]));  // new draws each epoch
  // The same draws for the same seed and epoch, whatever the number of workers.
  auto serial = make_dataset(plugins, section(palette(), "base_size: 40, crop_size: 40, batch_size: 3, workers: 0"));
  EXPECT_TRUE(at::equal(all_targets(*serial, 3), epochs[3]));
}

TEST_F(SegmentationFolder, BadFilesAreSkippedCountedAndNamed) {
  auto data = make_dataset(plugins, section(bad(), "base_size: 40, crop_size: 32, batch_size: 4, workers: 2"));
  EXPECT_EQ(data->size(), 12);  // the list names them; the loader skips them
  ::testing::internal::CaptureStderr();
  std::int64_t delivered = 0;
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) delivered += all_targets(*data, epoch).size(0);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(delivered, 2 * 6);
  EXPECT_EQ(dynamic_cast<LoaderDataset&>(*data).loader().bad_samples(), 2 * 6);
  EXPECT_THAT(warnings, HasSubstr("bad_corrupt.jpg (mask bad_corrupt.png): cannot decode"));
  EXPECT_THAT(warnings, HasSubstr("bad_truncated.jpg (mask bad_truncated.png): truncated JPEG"));
  EXPECT_THAT(warnings, HasSubstr("(mask bad_no_mask.png): cannot open bad_no_mask.png"));
  EXPECT_THAT(warnings, HasSubstr("(mask bad_mask_size.png): the mask is 48 x 48 pixels, its image 48 x 40"));
  EXPECT_THAT(warnings, HasSubstr("(mask bad_rgb_mask.png): the mask is RGB: expected a palette PNG"));
  EXPECT_THAT(warnings, HasSubstr("(mask bad_class.png): the mask holds class 9, and the dataset has 5 classes"));

  auto strict = make_dataset(plugins, section(bad(), "base_size: 40, crop_size: 32, on_bad_sample: fail"));
  const Error e = testing::thrown_error([&] { collect_epoch(*strict, 0); });
  EXPECT_THAT(e.what(), HasSubstr("bad sample " + bad().string() + "/JPEGImages/bad_"));
  EXPECT_THAT(e.hint(), HasSubstr("on_bad_sample: skip"));
}

TEST_F(SegmentationFolder, AMissingRootOrImageSetIsARecipeErrorAtTheKey) {
  testing::expect_error([&] { make_dataset(plugins, "{name: segmentation_folder}"); }, ErrorKind::recipe, "root");
  testing::expect_error([&] { make_dataset(plugins, "{name: segmentation_folder, root: /nonexistent/voc}"); },
                        ErrorKind::recipe, "test.yaml:1:41: data.root: dataset root is not a folder: /nonexistent/voc");
  testing::expect_error(
      [&] { make_dataset(plugins, section(palette(), "image_set: trainval")); }, ErrorKind::recipe,
      "data.image_set: no image set list " + (palette() / "ImageSets/Segmentation/trainval.txt").string());
  testing::expect_error([&] { make_dataset(plugins, section(palette(), "hflip_prob: 2")); }, ErrorKind::recipe,
                        "hflip_prob");
}

}  // namespace
}  // namespace mixt
