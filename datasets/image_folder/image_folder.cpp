// datasets/image_folder — the ImageNet / torchvision ImageFolder layout: root/<class>/<image>,
// classes sorted, images decoded with OpenCV and augmented by mixt's transforms, loaded by
// mixt's multi-threaded DataLoader.
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

class ImageFolderSource : public mixt::SampleSource {
 public:
  ImageFolderSource(fs::path root, image_folder::FolderIndex index, mixt::TransformPipeline transforms, int channels,
                    std::int64_t max_pixels)
      : root_(std::move(root)),
        index_(std::move(index)),
        transforms_(std::move(transforms)),
        channels_(channels),
        max_pixels_(max_pixels) {}

  std::int64_t size() const override { return static_cast<std::int64_t>(index_.files.size()); }
  std::string sample_name(std::int64_t i) const override { return (root_ / file(i)).string(); }

  mixt::Sample load(std::int64_t i, mixt::SampleRng& rng) const override {
    const at::Tensor image = image_folder::decode_image(read_bytes(root_ / file(i)), channels_, max_pixels_);
    return {transforms_(image, rng), index_.labels[static_cast<std::size_t>(i)]};
  }

 private:
  const std::string& file(std::int64_t i) const { return index_.files[static_cast<std::size_t>(i)]; }

  fs::path root_;
  image_folder::FolderIndex index_;
  mixt::TransformPipeline transforms_;
  int channels_;
  std::int64_t max_pixels_;
};

const mixt::Required<std::string> kRoot{"root", "folder laid out as root/<class>/<image> (classes sorted by name)"};
const mixt::Option<std::string> kIndex{
    "index", "", "cache file of the file list: read when present, written after a scan (delete it to rescan)"};
const mixt::Option<std::int64_t> kChannels{"channels", 3, "3 (RGB) or 1 (grey)",
                                           [](const std::int64_t& n) -> std::optional<std::string> {
                                             if (n == 1 || n == 3) return std::nullopt;
                                             return "expected 1 (grey) or 3 (RGB)";
                                           }};

const mixt::Option<std::int64_t> kMaxImagePixels{
    "max_image_pixels", image_folder::kDefaultMaxImagePixels,
    "an image whose header claims more pixels is a bad sample, not decoded (Pillow's bomb limit)",
    mixt::at_least(1)};

image_folder::FolderIndex load_index(const mixt::Config& c, const fs::path& root) {
  const std::string cache = kIndex.read(c);
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

std::unique_ptr<mixt::Dataset> make_image_folder(const mixt::Config& c, const mixt::DatasetContext& context) {
  const fs::path root = kRoot.read(c);
  const std::int64_t channels = kChannels.read(c);
  const std::int64_t max_pixels = kMaxImagePixels.read(c);
  const bool train = context.split == "train";
  mixt::TransformPipeline transforms =
      mixt::read_transforms(c, "transforms", train ? mixt::imagenet_train_pipeline() : mixt::imagenet_eval_pipeline());
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
  const mixt::LoaderOptions options = mixt::read_loader_options(c, context, /*shuffle_default=*/train);
  // Decoding runs in mixt's worker threads; OpenCV's own pool would only oversubscribe.
  cv::setNumThreads(0);
  image_folder::FolderIndex index = load_index(c, root);
  std::vector<std::string> classes = index.classes;
  auto source =
      std::make_shared<ImageFolderSource>(root, std::move(index), std::move(transforms), static_cast<int>(channels),
                                          max_pixels);
  return std::make_unique<mixt::NamedLoaderDataset>(source, options, std::move(classes), shape);
}

void register_components(mixt::Registrar& registrar) {
  std::vector<mixt::OptionDoc> options = {kRoot, kIndex, kChannels, kMaxImagePixels};
  for (auto& doc : mixt::transform_option_docs()) {
    doc.default_value = "(below)";
    doc.help = "default: imagenet_train for data.train, imagenet_eval for the other splits. " + doc.help;
    options.push_back(doc);
  }
  for (auto& doc : mixt::loader_option_docs()) options.push_back(doc);
  // Whole literals: gcc 12 misreads a string + (ternary literal) chain here (-Warray-bounds).
  const char* summary = MIXT_HAVE_LIBJPEG ? "ImageNet-style folders root/<class>/<image>: JPEG decoded by "
                                            "libjpeg-turbo, PNG, BMP, WebP, TIFF, PPM/PGM by OpenCV"
                                          : "ImageNet-style folders root/<class>/<image>: JPEG, PNG, BMP, WebP, "
                                            "TIFF, PPM/PGM decoded by OpenCV";
  registrar.add_dataset("image_folder", {summary, options}, make_image_folder);
}

}  // namespace

MIXT_PLUGIN("image_folder", "1.0.0", register_components)
