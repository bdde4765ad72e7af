// datasets/cifar10 — CIFAR-10 in its binary format (cifar-10-batches-bin): data_batch_1..5.bin
// for train, test_batch.bin for test; each record is one label byte then 3072 pixel bytes
// (1024 red, 1024 green, 1024 blue, rows of 32). The split is held in memory as
// N x 32 x 32 x 3 uint8 (150 MB for train) and each sample goes through mixt's transforms
// in the DataLoader's workers.
#include <mixt/helpers/data_loader.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/helpers/transforms.h>

#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSide = 32, kRecord = 1 + 3 * kSide * kSide;
const std::vector<double> kMean = {0.4914, 0.4822, 0.4465};  // the training set's, per channel
const std::vector<double> kStd = {0.2470, 0.2435, 0.2616};

class Cifar10Source : public mixt::SampleSource {
 public:
  Cifar10Source(at::Tensor images, at::Tensor labels, std::vector<std::string> files,
                mixt::TransformPipeline transforms)
      : images_(std::move(images)),
        labels_(std::move(labels)),
        files_(std::move(files)),
        transforms_(std::move(transforms)) {}
  std::int64_t size() const override { return images_.size(0); }
  std::string sample_name(std::int64_t i) const override {
    const auto per_file = static_cast<std::int64_t>(size() / static_cast<std::int64_t>(files_.size()));
    return files_[static_cast<std::size_t>(i / per_file)] + " record " + std::to_string(i % per_file);
  }
  mixt::Sample load(std::int64_t i, mixt::SampleRng& rng) const override {
    return {transforms_(images_[i], rng), labels_.data_ptr<std::int64_t>()[i]};
  }
  std::string describe() const { return "32x32 RGB -> " + transforms_.describe(); }

 private:
  at::Tensor images_, labels_;
  std::vector<std::string> files_;
  mixt::TransformPipeline transforms_;
};

// The loader's dataset, which also says what a record goes through (for mixt export).
class Cifar10 : public mixt::NamedLoaderDataset, public mixt::DescribesPreprocessing {
 public:
  Cifar10(std::shared_ptr<const Cifar10Source> source, mixt::LoaderOptions options, std::vector<std::string> classes,
          std::vector<std::int64_t> shape)
      : NamedLoaderDataset(source, std::move(options), std::move(classes), std::move(shape)),
        preprocessing_(source->describe()) {}
  std::string preprocessing() const override { return preprocessing_; }
  mixt::DatasetCapabilities capabilities() override {
    mixt::DatasetCapabilities can = NamedLoaderDataset::capabilities();
    can.describes_preprocessing = this;
    return can;
  }

 private:
  std::string preprocessing_;
};

constexpr std::int64_t kBatchSize = 128;  // the loader's batch_size default here

struct Cifar10Options {
  std::string root;
  std::optional<std::string> split;  // absent: train for data.train, test otherwise
  mixt::TransformKeys transforms;
  mixt::LoaderKeys loader;
  mixt::RecipeSection where;
};

using O = Cifar10Options;
const auto kOptions =
    mixt::OptionsOf<O>()
        .required(&O::root, "root", "the cifar-10-batches-bin folder")
        .contextual(&O::split, "split", "train for data.train, test otherwise",
                    "train: data_batch_1..5.bin; test: test_batch.bin", mixt::one_of({"train", "test"}))
        .include(&O::transforms, mixt::transform_keys("[random_horizontal_flip (train only), to_tensor, normalize "
                                                      "with CIFAR-10's mean/std]"))
        .include(&O::loader, mixt::loader_keys(kBatchSize))
        .recipe_section(&O::where);

std::unique_ptr<mixt::Dataset> make_cifar10(const Cifar10Options& o, const mixt::DatasetContext& context) {
  const fs::path root = o.root;
  const mixt::RecipeSection& c = o.where;
  const std::string split = o.split.value_or(context.split == "train" ? "train" : "test");
  const bool train = split == "train";
  mixt::TransformPipeline transforms;
  if (o.transforms.pipeline) {
    transforms = *o.transforms.pipeline;
  } else {
    if (train) transforms.add(mixt::make_random_horizontal_flip(0.5));
    transforms.add(mixt::make_to_tensor(false));
    transforms.add(mixt::make_normalize(kMean, kStd));
  }
  const mixt::LoaderOptions options = o.loader.for_context(context, /*shuffle_default=*/train);

  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    c.fail("root", "dataset root does not exist: " + root.string(),
           "point root: at the cifar-10-batches-bin folder (data_batch_1.bin ... test_batch.bin)");
  }
  std::vector<std::string> names;
  if (train) {
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    names.push_back("test_batch.bin");
  }
  std::vector<std::uint8_t> bytes;
  std::vector<std::string> files;
  std::int64_t per_file = -1;
  for (const auto& name : names) {
    const fs::path file = root / name;
    std::ifstream in(file, std::ios::binary);
    if (!in) c.fail("root", "missing " + name + " in " + root.string());
    const std::vector<std::uint8_t> content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto size = static_cast<std::int64_t>(content.size());
    if (size == 0 || size % kRecord != 0) {
      c.fail("root", file.string() + " is not a CIFAR-10 binary batch: " + std::to_string(size) +
                         " bytes is not a multiple of the 3073-byte record");
    }
    if (per_file >= 0 && size / kRecord != per_file) c.fail("root", file.string() + " has a different record count");
    per_file = size / kRecord;
    bytes.insert(bytes.end(), content.begin(), content.end());
    files.push_back(file.string());
  }
  const std::int64_t n = static_cast<std::int64_t>(bytes.size()) / kRecord;
  const at::Tensor records = at::from_blob(bytes.data(), {n, kRecord}, at::kByte);
  at::Tensor labels = records.select(1, 0).to(at::kLong);
  if (labels.max().item<std::int64_t>() > 9) {
    c.fail("root", "labels above 9: not CIFAR-10 (CIFAR-100 has another layout)");
  }
  // N x 3 x 32 x 32 planes -> N x 32 x 32 x 3, the decoded-image layout the transforms take.
  at::Tensor images = records.slice(1, 1).view({n, 3, kSide, kSide}).permute({0, 2, 3, 1}).contiguous();
  const std::vector<std::int64_t> shape = transforms.output_shape(kSide, kSide, 3);
  auto source = std::make_shared<Cifar10Source>(images, labels.contiguous(), files, std::move(transforms));
  // batches.meta.txt's names, in label order (torchvision's CIFAR10.classes).
  std::vector<std::string> classes = {"airplane", "automobile", "bird",  "cat",  "deer",
                                      "dog",      "frog",       "horse", "ship", "truck"};
  return std::make_unique<Cifar10>(source, options, std::move(classes), shape);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset("cifar10", "CIFAR-10 32x32 colour images, 10 classes (binary batches)", kOptions,
                        make_cifar10);
}

}  // namespace

MIXT_PLUGIN("cifar10", "1.0.0", register_components)
