// datasets/segmentation_folder — semantic segmentation from Pascal VOC's layout (voc_layout.h):
// JPEG images and PNG masks of class indices (VOC's palette PNGs, or 8-bit grey ones; 255
// marks pixels that count nowhere), augmented jointly as torchvision's segmentation reference
// (joint_transforms.h) and loaded by mixt's DataLoader: a file that does not decode, a mask of
// another size than its image or with a class outside the dataset's is a bad sample, skipped
// and counted (or fatal with on_bad_sample: fail). Batches: images [N, 3, crop, crop] and
// masks [N, crop, crop] int64, the targets of the segmentation task.
#include <mixt/decodes_files.h>
#include <mixt/helpers/data_loader.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <fstream>
#include <opencv2/core.hpp>

#include "../image_folder/image_decoder.h"
#include "joint_transforms.h"
#include "mask_decoder.h"
#include "voc_layout.h"

namespace {

namespace fs = std::filesystem;
using segmentation_folder::ImageAndMask;
using segmentation_folder::JointTransforms;

std::vector<std::uint8_t> read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw mixt::BadSample("cannot open " + file.filename().string());
  const auto size = static_cast<std::size_t>(in.tellg());
  std::vector<std::uint8_t> bytes(size);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!in) throw mixt::BadSample("cannot read " + file.filename().string());
  return bytes;
}

struct Decoding {
  JointTransforms transforms;
  std::int64_t classes = 21;
  std::int64_t max_pixels = image_folder::kDefaultMaxImagePixels;

  at::Tensor image(const fs::path& file) const { return image_folder::decode_image(read_bytes(file), 3, max_pixels); }
  // The mask's classes, checked: 255 or below the class count.
  at::Tensor mask(const fs::path& file, const at::Tensor& image) const {
    const at::Tensor mask = segmentation_folder::decode_mask(read_bytes(file), max_pixels);
    if (mask.size(0) != image.size(0) || mask.size(1) != image.size(1)) {
      throw mixt::BadSample("the mask is " + std::to_string(mask.size(1)) + " x " + std::to_string(mask.size(0)) +
                            " pixels, its image " + std::to_string(image.size(1)) + " x " +
                            std::to_string(image.size(0)));
    }
    const at::Tensor counted = mask.masked_select(mask.ne(255));
    if (counted.numel() > 0) {
      const auto highest = counted.max().item<std::int64_t>();
      if (highest >= classes) {
        throw mixt::BadSample("the mask holds class " + std::to_string(highest) + ", and the dataset has " +
                              std::to_string(classes) + " classes (0.." + std::to_string(classes - 1) +
                              "; 255: ignore)");
      }
    }
    return mask;
  }
};

class VocSource : public mixt::TensorSampleSource {
 public:
  VocSource(fs::path root, std::vector<std::string> ids, std::shared_ptr<const Decoding> decoding)
      : root_(std::move(root)), ids_(std::move(ids)), decoding_(std::move(decoding)) {}

  std::int64_t size() const override { return static_cast<std::int64_t>(ids_.size()); }
  std::string sample_name(std::int64_t i) const override {
    return segmentation_folder::image_file(root_, id(i)).string() + " (mask " +
           segmentation_folder::mask_file(root_, id(i)).filename().string() + ")";
  }
  mixt::TensorSample load_tensor_sample(std::int64_t i, mixt::SampleRng& rng) const override {
    const at::Tensor image = decoding_->image(segmentation_folder::image_file(root_, id(i)));
    const at::Tensor mask = decoding_->mask(segmentation_folder::mask_file(root_, id(i)), image);
    auto [input, target] = decoding_->transforms(ImageAndMask{image, mask}, rng);
    return {std::move(input), std::move(target)};
  }

 private:
  const std::string& id(std::int64_t i) const { return ids_[static_cast<std::size_t>(i)]; }

  fs::path root_;
  std::vector<std::string> ids_;
  std::shared_ptr<const Decoding> decoding_;
};

class SegmentationFolder : public mixt::NamedLoaderDataset,
                           public mixt::DecodesFiles,
                           public mixt::DescribesPreprocessing {
 public:
  SegmentationFolder(std::shared_ptr<const mixt::SampleSource> source, mixt::LoaderOptions options,
                     std::vector<std::string> classes, std::shared_ptr<const Decoding> decoding)
      : NamedLoaderDataset(std::move(source), std::move(options), std::move(classes),
                           {3, decoding->transforms.crop_size, decoding->transforms.crop_size}),
        decoding_(std::move(decoding)) {}

  // mixt predict: an image through the evaluation's resize and crop, without a mask.
  bool takes_file(const std::string& path) const override {
    std::string extension = fs::path(path).extension().string();
    for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return extension == ".jpg" || extension == ".jpeg" || extension == ".png";
  }
  at::Tensor decode_file(const std::string& path) const override {
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw mixt::runtime_error(path + ": a folder, not an image file");
    mixt::SampleRng rng = mixt::SampleRng::for_sample(0, 0, 0);  // the evaluation's transforms draw nothing
    try {
      return decoding_->transforms(ImageAndMask{decoding_->image(path), {}}, rng).first;
    } catch (const mixt::BadSample& e) {
      throw mixt::runtime_error(path + ": " + e.what());
    }
  }
  std::string preprocessing() const override {
    return "decode as RGB, mask as class indices -> " + decoding_->transforms.describe();
  }
  mixt::DatasetCapabilities capabilities() override {
    mixt::DatasetCapabilities can = NamedLoaderDataset::capabilities();
    can.decodes_files = this;
    can.describes_preprocessing = this;
    return can;
  }

 private:
  std::shared_ptr<const Decoding> decoding_;
};

struct SegmentationFolderOptions {
  std::optional<std::string> root;  // required, except by mixt predict
  std::optional<std::string> image_set;
  std::vector<std::string> classes = segmentation_folder::voc_class_names();
  std::int64_t base_size = 520;
  std::int64_t crop_size = 480;
  double hflip_prob = 0.5;
  std::int64_t max_image_pixels = image_folder::kDefaultMaxImagePixels;
  mixt::LoaderKeys loader;
  mixt::RecipeSection where;
};

std::optional<std::string> class_count_fits(const std::vector<std::string>& classes) {
  if (classes.empty()) return "expected at least one class name";
  if (classes.size() > 255) return "at most 255 classes: mask value 255 means ignore";
  return std::nullopt;
}

using O = SegmentationFolderOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .contextual(&O::root, "root", "required; mixt predict can do without",
                    "a VOC-layout folder: ImageSets/Segmentation/<image_set>.txt, JPEGImages/<id>.jpg, "
                    "SegmentationClass/<id>.png")
        .contextual(&O::image_set, "image_set", "train for data.train, val otherwise",
                    "the list of ids read: root/ImageSets/Segmentation/<image_set>.txt")
        .add(&O::classes, "classes", "class names in mask-value order (default: VOC's 21, background first)",
             class_count_fits)
        .add(&O::base_size, "base_size",
             "train: the shorter side is resized to a random size in [base_size/2, 2*base_size]; eval: to base_size",
             mixt::at_least(1))
        .add(&O::crop_size, "crop_size",
             "the square crop every sample ends as (padded first where smaller: image 0, mask 255)", mixt::at_least(1))
        .add(&O::hflip_prob, "hflip_prob", "train: the chance of a horizontal flip of image and mask together",
             mixt::at_least(0) && mixt::at_most(1))
        .add(&O::max_image_pixels, "max_image_pixels",
             "an image or mask whose header claims more pixels is a bad sample, not decoded (Pillow's bomb limit)",
             mixt::at_least(1))
        .include(&O::loader, mixt::loader_keys(8))
        .recipe_section(&O::where);

std::unique_ptr<mixt::Dataset> make_segmentation_folder(const O& o, const mixt::DatasetContext& context) {
  const mixt::RecipeSection& c = o.where;
  const bool predicting = context.split == mixt::kPredictSplit;
  if (!predicting && !o.root) c.fail_missing("root");
  const bool train = context.split == "train";
  auto decoding = std::make_shared<Decoding>();
  decoding->transforms = JointTransforms{train, o.base_size, o.crop_size, o.hflip_prob};
  decoding->classes = static_cast<std::int64_t>(o.classes.size());
  decoding->max_pixels = o.max_image_pixels;
  const fs::path root = o.root.value_or("");
  std::vector<std::string> ids;
  if (!predicting) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      c.fail("root", "dataset root is not a folder: " + root.string(),
             "point root: at a VOC-layout folder (VOCdevkit/VOC2012), in the recipe or on the command line (" +
                 c.path() + ".root=/path/to/VOC2012)");
    }
    try {
      ids = segmentation_folder::read_image_set(root, o.image_set.value_or(train ? "train" : "val"));
    } catch (const segmentation_folder::LayoutError& e) {
      c.fail(o.image_set ? "image_set" : "root", e.message, e.hint);
    }
  }
  // Decoding runs in mixt's worker threads; OpenCV's own pool would only oversubscribe.
  cv::setNumThreads(0);
  auto source = std::make_shared<VocSource>(root, std::move(ids), decoding);
  return std::make_unique<SegmentationFolder>(source, o.loader.for_context(context, /*shuffle_default=*/train),
                                              o.classes, decoding);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset("segmentation_folder",
                        "semantic segmentation in Pascal VOC's layout: JPEG images, palette or grey PNG masks of "
                        "class indices (255: ignore), resized, flipped and cropped together as torchvision's "
                        "segmentation reference",
                        kOptions, make_segmentation_folder);
}

}  // namespace

MIXT_PLUGIN("segmentation_folder", "1.0.0", register_components)
