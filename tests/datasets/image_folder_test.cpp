// The image_folder dataset plugin on a real tree: Fashion-MNIST test images written as
// JPEG/PNG/BMP class folders by tests/fixtures/data/make_image_folder.py (60 images,
// classes sorted by name), plus a corrupt and a truncated JPEG.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "expect_error.h"
#include <mixt/helpers/data_loader.h>

#include <fstream>

#include "data_support.h"

namespace mixt {
namespace {

using testing::BuiltPlugins;
using testing::collect_epoch;
using testing::make_dataset;

class ImageFolder : public ::testing::Test {
 protected:
  static fs::path good() { return testing::fixture_tree("make_image_folder.py"); }
  static fs::path bad() { return testing::fixture_tree("make_image_folder.py", "--bad"); }
  static fs::path swatches() { return testing::fixture_tree("make_image_folder.py", "--swatches"); }
  static fs::path bombs() { return testing::fixture_tree("make_image_folder.py", "--bombs"); }

  static std::string section(const fs::path& root, const std::string& extra) {
    return "{name: image_folder, root: " + root.string() + ", " + extra + "}";
  }

  BuiltPlugins plugins;
};

const char* const kSmallTrain =
    "transforms: [{name: random_resized_crop, size: 32}, random_horizontal_flip, to_tensor, normalize]";

TEST_F(ImageFolder, ReadsEveryImageWithClassesSortedByName) {
  auto data = make_dataset(plugins, section(good(),
                                            "batch_size: 16, shuffle: false, workers: 2, transforms: "
                                            "[{name: resize, size: 40}, {name: center_crop, size: 36}, to_tensor]"));
  EXPECT_EQ(data->size(), 60);
  EXPECT_EQ(data->num_classes(), 10);
  EXPECT_EQ(data->sample_shape(), (std::vector<std::int64_t>{3, 36, 36}));
  const auto batches = collect_epoch(*data, 0);
  ASSERT_EQ(batches.size(), 4u);
  std::vector<at::Tensor> targets;
  for (const auto& b : batches) targets.push_back(b.targets);
  const at::Tensor all = at::cat(targets);
  // Without shuffle: class by class in sorted order, 6 each (ankle_boot = 0 ... tshirt = 9).
  EXPECT_TRUE(at::equal(all, at::arange(10, at::kLong).repeat_interleave(6)));
  // Grey Fashion-MNIST pictures: R = G = B, values in [0, 1], not all black.
  const at::Tensor x = batches[0].inputs;
  EXPECT_TRUE(at::allclose(x.select(1, 0), x.select(1, 1), 0, 0.02));
  EXPECT_GE(x.min().item<double>(), 0.0);
  EXPECT_LE(x.max().item<double>(), 1.0);
  EXPECT_GT(x.mean().item<double>(), 0.05);
}

TEST_F(ImageFolder, ChannelsComeOutInRgbOrder) {
  auto data = make_dataset(plugins, section(swatches(), "batch_size: 3, shuffle: false, workers: 0, transforms: "
                                                        "[{name: center_crop, size: 8}, to_tensor]"));
  const auto batch = collect_epoch(*data, 0).at(0);
  const at::Tensor mean_rgb = batch.inputs.mean({2, 3});  // [blue (JPEG), red (PNG), texture] x RGB
  EXPECT_TRUE(at::allclose(mean_rgb[0], at::tensor({0.0f, 0.0f, 1.0f}), 0, 0.02)) << mean_rgb;
  EXPECT_TRUE(at::allclose(mean_rgb[1], at::tensor({1.0f, 0.0f, 0.0f}), 0, 0.02)) << mean_rgb;
}

TEST_F(ImageFolder, JpegPixelsAreThoseThatPilDecodes) {
  // Both decode with libjpeg-turbo's default (islow) IDCT and fancy upsampling.
  const std::string raw = testing::read_file(swatches().string() + ".texture.rgb");
  ASSERT_EQ(raw.size(), 24u * 24u * 3u);
  const at::Tensor pil = at::from_blob(const_cast<char*>(raw.data()), {24, 24, 3}, at::kByte).to(at::kFloat);
  auto data = make_dataset(plugins, section(swatches(), "batch_size: 3, shuffle: false, workers: 0, transforms: "
                                                        "[{name: center_crop, size: 8}, to_tensor]"));
  const at::Tensor ours = collect_epoch(*data, 0).at(0).inputs[2].permute({1, 2, 0}) * 255.0;
  const at::Tensor expected = pil.slice(0, 8, 16).slice(1, 8, 16);
  EXPECT_LE((ours - expected).abs().max().item<double>(), 1.01);
  EXPECT_LT((ours - expected).abs().mean().item<double>(), 0.1);
}

TEST_F(ImageFolder, SameBatchesWithOneOrThreeWorkers) {
  auto one = make_dataset(plugins, section(good(), std::string("batch_size: 8, workers: 1, ") + kSmallTrain),
                          {"train", 11, 0, 1, at::kCPU});
  auto three =
      make_dataset(plugins, section(good(), std::string("batch_size: 8, workers: 3, prefetch: 5, ") + kSmallTrain),
                   {"train", 11, 0, 1, at::kCPU});
  auto other_seed = make_dataset(plugins, section(good(), std::string("batch_size: 8, workers: 3, ") + kSmallTrain),
                                 {"train", 12, 0, 1, at::kCPU});
  const auto reference = collect_epoch(*one, 1);
  EXPECT_TRUE(testing::same_batches(collect_epoch(*three, 1), reference));
  EXPECT_FALSE(testing::same_batches(collect_epoch(*three, 2), reference));
  EXPECT_FALSE(testing::same_batches(collect_epoch(*other_seed, 1), reference));
}

TEST_F(ImageFolder, CorruptAndTruncatedFilesAreSkippedCountedAndNamedOnce) {
  auto data = make_dataset(plugins, section(bad(), std::string("batch_size: 16, workers: 2, ") + kSmallTrain));
  EXPECT_EQ(data->size(), 62);  // the index lists them; the loader skips them
  ::testing::internal::CaptureStderr();
  std::int64_t delivered = 0;
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    for (const auto& b : collect_epoch(*data, epoch)) delivered += b.targets.size(0);
  }
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(delivered, 2 * 60);
  auto count = [&](const std::string& text) {
    std::size_t n = 0;
    for (auto at = warnings.find(text); at != std::string::npos; at = warnings.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("mixt: warning: skipping bad sample"), 2u) << warnings;
  // Random bytes begin as no format an image folder holds: no decoder of OpenCV's sees them
  // (GDCM's aborted the process on a damaged DICOM: fuzz/regressions/image).
  EXPECT_EQ(count("bag/corrupt.jpg: cannot decode: not a JPEG, PNG, BMP, PPM/PGM, TIFF or WebP image"), 1u) << warnings;
  EXPECT_EQ(count("bag/truncated.jpg: truncated JPEG"), 1u) << warnings;
  auto* loader_dataset = dynamic_cast<LoaderDataset*>(data.get());
  ASSERT_NE(loader_dataset, nullptr);
  EXPECT_EQ(loader_dataset->loader().bad_samples(), 4);
}

// A kilobyte whose header claims 60000 x 60000 (JPEG, through libjpeg or OpenCV) or 20000 x
// 20000 (PNG) is a bad sample, refused before anything is allocated; max_image_pixels
// sets the bound (a limit below the good images' 64 x 64 refuses them too). Two found by
// fuzzing (fuzz/regressions/image) are refused the same way: a PNG claiming 2^32 - 1
// squared, whose product overflowed int64 (undefined), and a JPEG with stray bytes between
// segments, which libjpeg skips and the size check gave up at.
TEST_F(ImageFolder, DecompressionBombsAreBadSamplesBeforeDecoding) {
  const auto read_all = [&](const std::string& extra, std::int64_t* delivered, std::string* warnings) {
    auto data = make_dataset(plugins, section(bombs(), "batch_size: 8, workers: 2, " + extra + kSmallTrain));
    ::testing::internal::CaptureStderr();
    *delivered = 0;
    for (const auto& b : collect_epoch(*data, 0)) *delivered += b.targets.size(0);
    *warnings = ::testing::internal::GetCapturedStderr();
    return data->size();
  };
  std::int64_t delivered = 0;
  std::string warnings;
  const std::int64_t files = read_all("", &delivered, &warnings);
  EXPECT_EQ(delivered, files - 4) << warnings;
  EXPECT_THAT(warnings, HasSubstr("coat/bomb.jpg: its header claims 60000 x 60000 pixels, more than max_image_pixels "
                          "(89478485)"))
      << warnings;
  EXPECT_THAT(warnings, HasSubstr("coat/bomb.png: its header claims 20000 x 20000 pixels"));
  EXPECT_THAT(warnings, HasSubstr("coat/bomb_overflow.png: its header claims 4294967295 x 4294967295 pixels"));
  EXPECT_THAT(warnings, HasSubstr("coat/bomb_stray_bytes.jpg: its header claims 60000 x 60000 pixels"));
  read_all("max_image_pixels: 4095, ", &delivered, &warnings);
  EXPECT_EQ(delivered, 0) << warnings;  // 64 x 64 = 4096 pixels each
  EXPECT_THROW(make_dataset(plugins, section(bombs(), "max_image_pixels: 0")), Error);
}

TEST_F(ImageFolder, OnBadSampleFailStopsWithTheFileNamed) {
  auto data = make_dataset(plugins, section(bad(), std::string("batch_size: 64, on_bad_sample: fail, ") + kSmallTrain));
  const Error e = testing::thrown_error([&] {
    collect_epoch(*data, 0);
  });
  EXPECT_EQ(e.exit_code(), 1);
  EXPECT_THAT(e.what(), HasSubstr("/bag/"));
  EXPECT_THAT(e.hint(), HasSubstr("on_bad_sample: skip"));
}

std::string recipe_error(BuiltPlugins& plugins, const std::string& yaml) {
  try {
    make_dataset(plugins, yaml);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST_F(ImageFolder, MissingRootIsARecipeErrorAtTheKey) {
  const std::string error = recipe_error(plugins, "{name: image_folder, root: /nonexistent/imagenet}");
  EXPECT_THAT(error, HasSubstr("test.yaml:1:34: data.root: dataset root does not exist: /nonexistent/imagenet"))
      << error;
}

// The class names, in label order: the folders sorted by name, as torchvision's
// ImageFolder.find_classes sorts them (the fixture's ten Fashion-MNIST names, by hand).
TEST_F(ImageFolder, ClassNamesAreTheFoldersInLabelOrder) {
  auto data = make_dataset(plugins, section(good(), kSmallTrain));
  EXPECT_EQ(class_names_of(*data), (std::vector<std::string>{"ankle_boot", "bag", "coat", "dress", "pullover",
                                                             "sandal", "shirt", "sneaker", "trouser", "tshirt"}));
}

TEST_F(ImageFolder, ARootThatIsAFileSaysSo) {
  TempDir tree;
  std::ofstream(tree.path() / "list.txt") << "not a folder";
  const std::string error = recipe_error(plugins, section(tree.path() / "list.txt", "workers: 0"));
  EXPECT_THAT(error, HasSubstr("data.root: dataset root is not a folder: " + (tree.path() / "list.txt").string()))
      << error;
}

// A link to a folder that contains it was walked until the path grew too long, and the
// filesystem error came out raw; now it is a recipe error naming the link. A broken link
// is still passed over.
TEST_F(ImageFolder, ASymbolicLinkLoopIsARecipeErrorNamingTheLink) {
  TempDir tree;
  fs::create_directories(tree.path() / "cat");
  fs::create_directories(tree.path() / "dog" / "inner");
  fs::copy_file(good() / "bag" / "002.jpg", tree.path() / "cat" / "1.jpg");
  fs::copy_file(good() / "bag" / "002.jpg", tree.path() / "dog" / "1.jpg");
  fs::create_symlink("/nonexistent/file.jpg", tree.path() / "cat" / "broken.jpg");
  EXPECT_EQ(make_dataset(plugins, section(tree.path(), "workers: 0, " + std::string(kSmallTrain)))->size(), 2);
  fs::create_directory_symlink("..", tree.path() / "dog" / "inner" / "up");
  const std::string error = recipe_error(plugins, section(tree.path(), "workers: 0"));
  EXPECT_THAT(error, HasSubstr("data.root: symbolic link loop: " + (tree.path() / "dog" / "inner" / "up").string()))
      << error;
}

// The index cache names a file; a folder there was an error only when the rename failed,
// in the filesystem's words. An index that cannot be written is no reason to stop: the
// next run walks the tree again.
TEST_F(ImageFolder, AnIndexPathThatIsAFolderIsARecipeErrorAndAnUnwritableOneAWarning) {
  TempDir tree;
  fs::create_directories(tree.path() / "cache");
  const std::string error =
      recipe_error(plugins, section(good(), "index: " + (tree.path() / "cache").string() + ", workers: 0"));
  EXPECT_THAT(error, HasSubstr("data.index: " + (tree.path() / "cache").string() + " is a folder"))
      << error;
  const fs::path unwritable = tree.path() / "missing" / "index.txt";  // its folder does not exist
  EXPECT_EQ(make_dataset(plugins, section(good(), "index: " + unwritable.string() + ", " + kSmallTrain))->size(), 60);
  EXPECT_FALSE(fs::exists(unwritable));
}

TEST_F(ImageFolder, EmptyClassFolderIsARecipeError) {
  TempDir tree;
  fs::create_directories(tree.path() / "cat");
  fs::create_directories(tree.path() / "dog");
  fs::copy_file(good() / "bag" / "002.jpg", tree.path() / "cat" / "1.jpg");
  std::ofstream(tree.path() / "dog" / "notes.txt") << "not an image";
  const std::string error = recipe_error(plugins, section(tree.path(), "workers: 0"));
  EXPECT_THAT(error, HasSubstr("data.root: class folder " + (tree.path() / "dog").string() + " has no images"))
      << error;
}

TEST_F(ImageFolder, UnbatchableTransformsAreARecipeError) {
  const std::string error = recipe_error(plugins, section(good(), "transforms: [{name: resize, size: 40}, to_tensor]"));
  EXPECT_THAT(error, HasSubstr("data.transforms: these transforms give images of different sizes"));
}

TEST_F(ImageFolder, TransformsThatDoNotFitTheChannelsAreARecipeError) {
  const std::string error = recipe_error(plugins, section(good(), "channels: 1"));  // ImageNet's 3-channel normalize
  EXPECT_THAT(error, HasSubstr("data.transforms: normalize: the image has 1 channels but mean has 3 values"))
      << error;
  auto grey = make_dataset(plugins, section(good(),
                                            "channels: 1, batch_size: 60, transforms: [{name: center_crop, size: 28}, "
                                            "to_tensor, {name: normalize, mean: [0.5], std: [0.5]}]"));
  EXPECT_EQ(grey->sample_shape(), (std::vector<std::int64_t>{1, 28, 28}));
  EXPECT_EQ(collect_epoch(*grey, 0).at(0).inputs.sizes(), (std::vector<std::int64_t>{60, 1, 28, 28}));
}

TEST_F(ImageFolder, TheCachedIndexIsWrittenOnceAndReused) {
  TempDir tree;
  fs::copy(good(), tree.path() / "images", fs::copy_options::recursive);
  const fs::path index = tree.path() / "index.txt";
  const std::string options = "index: " + index.string() + ", " + kSmallTrain;
  EXPECT_EQ(make_dataset(plugins, section(tree.path() / "images", options))->size(), 60);
  ASSERT_TRUE(fs::exists(index));
  // A file added after the index was written is not seen: the tree is not walked again.
  fs::copy_file(good() / "bag" / "002.jpg", tree.path() / "images" / "bag" / "extra.jpg");
  EXPECT_EQ(make_dataset(plugins, section(tree.path() / "images", options))->size(), 60);
  fs::remove(index);
  EXPECT_EQ(make_dataset(plugins, section(tree.path() / "images", options))->size(), 61);
}

// An index cut short (a full disk while it was written, before v3 checked the stream) used
// to be read as a smaller dataset; it is rebuilt. A trailing partial line would have been
// a file with half a name.
TEST_F(ImageFolder, AnIndexCutShortIsRebuiltNotReadAsFewerFiles) {
  TempDir tree;
  fs::copy(good(), tree.path() / "images", fs::copy_options::recursive);
  const fs::path index = tree.path() / "index.txt";
  const std::string options = "index: " + index.string() + ", " + kSmallTrain;
  EXPECT_EQ(make_dataset(plugins, section(tree.path() / "images", options))->size(), 60);
  const std::string whole = testing::read_file(index);
  const std::size_t cut = whole.size() * 2 / 3;
  for (const std::string& shortened : {whole.substr(0, cut), whole.substr(0, whole.rfind("end"))}) {
    std::ofstream(index, std::ios::trunc) << shortened;
    EXPECT_EQ(make_dataset(plugins, section(tree.path() / "images", options))->size(), 60);
    EXPECT_EQ(testing::read_file(index), whole);  // rewritten whole
  }
  for (const auto& entry : fs::directory_iterator(tree.path())) {
    EXPECT_THAT(entry.path().string(), Not(HasSubstr(".tmp"))) << entry.path();
  }
}

// What the index cannot vouch for is checked with one directory listing: an index made for
// another tree (the same index: file named for train and val) or a class folder added
// since would train on the wrong files, or shift every label after it.
TEST_F(ImageFolder, AnIndexOfAnotherTreeOrOtherClassesIsRebuilt) {
  TempDir tree;
  fs::copy(good(), tree.path() / "train", fs::copy_options::recursive);
  fs::create_directories(tree.path() / "val" / "bag");
  fs::copy_file(good() / "bag" / "002.jpg", tree.path() / "val" / "bag" / "002.jpg");
  const fs::path index = tree.path() / "index.txt";
  const std::string options = "index: " + index.string() + ", shuffle: false, " + kSmallTrain;
  EXPECT_EQ(make_dataset(plugins, section(tree.path() / "train", options))->size(), 60);
  EXPECT_EQ(make_dataset(plugins, section(tree.path() / "val", options))->size(), 1);  // not train's 60
  EXPECT_EQ(make_dataset(plugins, section(tree.path() / "train", options))->size(), 60);

  // A new class sorted first ("aardvark"): every other label moves up by one.
  fs::create_directories(tree.path() / "train" / "aardvark");
  fs::copy_file(good() / "bag" / "002.jpg", tree.path() / "train" / "aardvark" / "a.jpg");
  auto data = make_dataset(plugins, section(tree.path() / "train", options));
  EXPECT_EQ(data->size(), 61);
  EXPECT_EQ(data->num_classes(), 11);
  EXPECT_EQ(collect_epoch(*data, 0).front().targets[0].item<std::int64_t>(), 0);  // the aardvark
}

}  // namespace
}  // namespace mixt
