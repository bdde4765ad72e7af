// datasets/image_folder — the ImageNet / torchvision ImageFolder layout: root/<class>/<image>,
// classes sorted, images decoded with OpenCV and augmented by mixt's transforms, loaded by
// mixt's multi-threaded DataLoader.
#include <mixt/decodes_files.h>
#include <mixt/helpers/data_loader.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/helpers/transforms.h>

#include <cstdio>
#include <fstream>
#include <opencv2/core.hpp>

#include "folder_index.h"
#include "image_decoder.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw mixt::BadSample("cannot open the file");
  const auto size = static_cast<std::size_t>(in.tellg());
  std::vector<std::uint8_t> bytes(size);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!in) throw mixt::BadSample("cannot read the file");
  return bytes;
}

// How a file becomes a sample: decoded, then transformed. The loader's samples and the
// files mixt predict names (DecodesFiles) go through the same one.
class ImageDecoding {
 public:
  ImageDecoding(mixt::TransformPipeline transforms, int channels, std::int64_t max_pixels)
      : transforms_(std::move(transforms)), channels_(channels), max_pixels_(max_pixels) {}

  // Throws mixt::BadSample for a file that cannot be used.
  at::Tensor operator()(const fs::path& file, mixt::SampleRng& rng) const {
    return transforms_(image_folder::decode_image(read_bytes(file), channels_, max_pixels_), rng);
  }

  // What a file goes through, in words (DescribesPreprocessing).
  std::string describe() const {
    return std::string(channels_ == 3 ? "decode as RGB" : "decode as grey") + " -> " + transforms_.describe();
  }

  // One file named by the user, as mixt predict asks for it.
  at::Tensor decode_file(const std::string& path) const {
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw mixt::runtime_error(path + ": a folder, not an image file");
    mixt::SampleRng rng = mixt::SampleRng::for_sample(0, 0, 0);  // evaluation transforms draw nothing
    try {
      return (*this)(path, rng);
    } catch (const mixt::BadSample& e) {
      throw mixt::runtime_error(path + ": " + e.what());
    } catch (const c10::Error& e) {  // a transform that cannot take this image
      const std::string what = e.what_without_backtrace();
      throw mixt::runtime_error(path + ": " + what.substr(0, what.find('\n')));
    }
  }

 private:
  mixt::TransformPipeline transforms_;
  int channels_;
  std::int64_t max_pixels_;
};

class ImageFolderSource : public mixt::SampleSource {
 public:
  ImageFolderSource(fs::path root, image_folder::FolderIndex index, std::shared_ptr<const ImageDecoding> decoding)
      : root_(std::move(root)), index_(std::move(index)), decoding_(std::move(decoding)) {}

  std::int64_t size() const override { return static_cast<std::int64_t>(index_.files.size()); }
  std::string sample_name(std::int64_t i) const override { return (root_ / file(i)).string(); }

  mixt::Sample load(std::int64_t i, mixt::SampleRng& rng) const override {
    return {(*decoding_)(root_ / file(i), rng), index_.labels[static_cast<std::size_t>(i)]};
  }

 private:
  const std::string& file(std::int64_t i) const { return index_.files[static_cast<std::size_t>(i)]; }

  fs::path root_;
  image_folder::FolderIndex index_;
  std::shared_ptr<const ImageDecoding> decoding_;
};

class ImageFolderDataset : public mixt::NamedLoaderDataset,
                           public mixt::DecodesFiles,
                           public mixt::DescribesPreprocessing {
 public:
  ImageFolderDataset(std::shared_ptr<const mixt::SampleSource> source, mixt::LoaderOptions options,
                     std::vector<std::string> classes, std::vector<std::int64_t> shape,
                     std::shared_ptr<const ImageDecoding> decoding)
      : NamedLoaderDataset(std::move(source), std::move(options), std::move(classes), std::move(shape)),
        decoding_(std::move(decoding)) {}
  bool takes_file(const std::string& path) const override { return image_folder::is_image_file(path); }
  at::Tensor decode_file(const std::string& path) const override { return decoding_->decode_file(path); }
  std::string preprocessing() const override { return decoding_->describe(); }
  mixt::DatasetCapabilities capabilities() override {
    mixt::DatasetCapabilities can = NamedLoaderDataset::capabilities();
    can.decodes_files = this;
    can.describes_preprocessing = this;
    return can;
  }

 private:
  std::shared_ptr<const ImageDecoding> decoding_;
};

// Built for mixt predict (mixt::kPredictSplit): no samples, only the decoder, the sample
// shape and the class names when the tree (or its index) is there to say them.
class ImageFiles : public mixt::Dataset,
                   public mixt::NamedClasses,
                   public mixt::DecodesFiles,
                   public mixt::DescribesPreprocessing {
 public:
  ImageFiles(std::vector<std::string> classes, std::vector<std::int64_t> shape,
             std::shared_ptr<const ImageDecoding> decoding)
      : classes_(std::move(classes)), shape_(std::move(shape)), decoding_(std::move(decoding)) {}
  std::int64_t size() const override { return 0; }
  std::int64_t num_classes() const override { return static_cast<std::int64_t>(classes_.size()); }
  std::vector<std::int64_t> sample_shape() const override { return shape_; }
  std::int64_t batches_per_epoch() const override { return 0; }
  void start_epoch(std::int64_t) override {}
  std::optional<mixt::Batch> next_batch() override { return std::nullopt; }
  std::vector<std::string> class_names() const override { return classes_; }
  bool takes_file(const std::string& path) const override { return image_folder::is_image_file(path); }
  at::Tensor decode_file(const std::string& path) const override { return decoding_->decode_file(path); }
  std::string preprocessing() const override { return decoding_->describe(); }
  mixt::DatasetCapabilities capabilities() override {
    mixt::DatasetCapabilities can;
    can.named_classes = this;
    can.decodes_files = this;
    can.describes_preprocessing = this;
    return can;
  }

 private:
  std::vector<std::string> classes_;
  std::vector<std::int64_t> shape_;
  std::shared_ptr<const ImageDecoding> decoding_;
};

struct ImageFolderOptions {
  std::optional<std::string> root;  // required, except by mixt predict
  std::string index;
  std::int64_t channels = 3;
  std::int64_t max_image_pixels = image_folder::kDefaultMaxImagePixels;
  mixt::TransformKeys transforms;
  mixt::LoaderKeys loader;
  mixt::RecipeSection where;
};

std::optional<std::string> grey_or_rgb(const std::int64_t& n) {
  if (n == 1 || n == 3) return std::nullopt;
  return "expected 1 (grey) or 3 (RGB)";
}

using O = ImageFolderOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .contextual(&O::root, "root", "required; mixt predict can do without",
                    "folder laid out as root/<class>/<image> (classes sorted by name)")
        .add(&O::index, "index", "cache file of the file list: read when present, written after a scan (delete it to rescan)")
        .add(&O::channels, "channels", "3 (RGB) or 1 (grey)", grey_or_rgb)
        .add(&O::max_image_pixels, "max_image_pixels",
             "an image whose header claims more pixels is a bad sample, not decoded (Pillow's bomb limit)",
             mixt::at_least(1))
        .include(&O::transforms, mixt::transform_keys("imagenet_train for data.train, imagenet_eval for the other splits"))
        .include(&O::loader, mixt::loader_keys())
        .recipe_section(&O::where);

image_folder::FolderIndex load_index(const ImageFolderOptions& o, const fs::path& root) {
  const mixt::RecipeSection& c = o.where;
  const std::string& cache = o.index;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    c.fail("root", (fs::exists(root, ec) ? "dataset root is not a folder: " : "dataset root does not exist: ") +
                       root.string(),
           "point root: at a folder laid out as root/<class>/<image>, in the recipe or on the command line (" +
               c.path() + ".root=/path/to/folder)");
  }
  if (!cache.empty() && fs::is_directory(cache, ec)) {
    c.fail("index", cache + " is a folder", "index: names the cache file itself, e.g. " +
                                                (fs::path(cache) / "train.index").string());
  }
  image_folder::FolderIndex index;
  if (!cache.empty() && image_folder::read_index(cache, index)) {
    const std::string stale = image_folder::stale_index_reason(index, root);
    if (stale.empty()) return index;
    std::fprintf(stderr, "mixt: warning: %s.index %s does not fit %s (%s): walking the tree again and rewriting it\n",
                 c.path().c_str(), cache.c_str(), root.string().c_str(), stale.c_str());
  } else if (!cache.empty() && fs::exists(cache)) {
    std::fprintf(stderr,
                 "mixt: warning: %s.index %s is incomplete or of an older mixt: walking the tree again and "
                 "rewriting it\n",
                 c.path().c_str(), cache.c_str());
  }
  try {
    index = image_folder::scan_folder(root);
  } catch (const image_folder::TreeError& e) {
    c.fail("root", e.message, e.hint);
  }
  if (!cache.empty()) {
    // Without the cache the next run walks the tree again: slower, not wrong.
    try {
      image_folder::write_index(cache, index);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mixt: warning: %s: cannot write the index (%s); the next run walks the tree again\n",
                   c.location("index").str().c_str(), e.what());
    }
  }
  return index;
}

// The class names for mixt predict without walking the tree: its class folders when the
// root is there, else its index's, else none.
std::unique_ptr<mixt::Dataset> make_image_files(const ImageFolderOptions& o, std::vector<std::int64_t> shape,
                                                std::shared_ptr<const ImageDecoding> decoding) {
  std::vector<std::string> classes;
  const fs::path root = o.root.value_or("");
  const std::string& cache = o.index;
  std::error_code ec;
  image_folder::FolderIndex index;
  if (!root.empty() && fs::is_directory(root, ec)) {
    try {
      classes = image_folder::list_classes(root);
    } catch (const image_folder::TreeError&) {  // an empty or unreadable tree names nothing
    }
  } else if (!cache.empty() && image_folder::read_index(cache, index)) {
    classes = index.classes;
  }
  return std::make_unique<ImageFiles>(std::move(classes), std::move(shape), std::move(decoding));
}

std::unique_ptr<mixt::Dataset> make_image_folder(const ImageFolderOptions& o, const mixt::DatasetContext& context) {
  const mixt::RecipeSection& c = o.where;
  // mixt predict may run where the data is not (only the model and a few images are).
  const bool predicting = context.split == mixt::kPredictSplit;
  if (!predicting && !o.root) c.fail_missing("root");
  const fs::path root = o.root.value_or("");
  const std::int64_t channels = o.channels;
  const std::int64_t max_pixels = o.max_image_pixels;
  const bool train = context.split == "train";
  mixt::TransformPipeline transforms = o.transforms.pipeline.value_or(
      train ? mixt::imagenet_train_pipeline() : mixt::imagenet_eval_pipeline());
  // Running the pipeline once on a blank image finds the sample shape, and mistakes such
  // as a 3-value normalize on grey images before any file is read.
  bool fixed_size = false;
  std::vector<std::int64_t> shape;
  try {
    fixed_size = transforms.has_fixed_output_size(channels);
    shape = transforms.output_shape(256, 256, channels);
  } catch (const mixt::Error& e) {
    c.fail("transforms", e.message(), "match the transforms to channels: " + std::to_string(channels));
  } catch (const c10::Error& e) {  // a crop of 100000 pixels a side: 120 GB per sample
    const std::string what = e.what_without_backtrace();
    c.fail("transforms", "the transforms fail on a blank 256x256 image: " + what.substr(0, what.find('\n')),
           "check the sizes in the transforms");
  }
  if (!fixed_size) {
    c.fail("transforms", "these transforms give images of different sizes, which cannot be batched",
           "end the geometric transforms with center_crop or random_resized_crop");
  }
  const mixt::LoaderOptions options = o.loader.for_context(context, /*shuffle_default=*/train);
  // Decoding runs in mixt's worker threads; OpenCV's own pool would only oversubscribe.
  cv::setNumThreads(0);
  auto decoding = std::make_shared<const ImageDecoding>(std::move(transforms), static_cast<int>(channels), max_pixels);
  if (predicting) return make_image_files(o, std::move(shape), std::move(decoding));
  image_folder::FolderIndex index = load_index(o, root);
  std::vector<std::string> classes = index.classes;
  auto source = std::make_shared<ImageFolderSource>(root, std::move(index), decoding);
  return std::make_unique<ImageFolderDataset>(source, options, std::move(classes), shape, std::move(decoding));
}

void register_components(mixt::Registrar& registrar) {
  // Whole literals: gcc 12 misreads a string + (ternary literal) chain here (-Warray-bounds).
  const char* summary = MIXT_HAVE_LIBJPEG ? "ImageNet-style folders root/<class>/<image>: JPEG decoded by "
                                            "libjpeg-turbo, PNG, BMP, WebP, TIFF, PPM/PGM by OpenCV"
                                          : "ImageNet-style folders root/<class>/<image>: JPEG, PNG, BMP, WebP, "
                                            "TIFF, PPM/PGM decoded by OpenCV";
  registrar.add_dataset("image_folder", summary, kOptions, make_image_folder);
}

}  // namespace

MIXT_PLUGIN("image_folder", "1.0.0", register_components)
