// torchscript_loader: runs a model written by `mixt export -o model.pt` on image files with
// LibTorch alone (no mixt header, no libmixt) and prints each image's top classes, named and
// preprocessed as the file's metadata says (docs/deploy.md, "A standalone LibTorch program").
//
//   torchscript_loader MODEL.pt IMAGE... [--top-k K]
//
// Output, per image: its path, then one line per class, most likely first:
//   <rank> <index> <probability> <class name>
#include <torch/script.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "metadata.h"
#include "preprocessing.h"

namespace {

struct Arguments {
  std::string model;
  std::vector<std::string> images;
  std::int64_t top_k = 5;
};

Arguments parse(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--top-k" && i + 1 < argc) {
      args.top_k = std::atoll(argv[++i]);
    } else if (args.model.empty()) {
      args.model = arg;
    } else {
      args.images.push_back(arg);
    }
  }
  if (args.model.empty() || args.images.empty() || args.top_k < 1) {
    throw std::invalid_argument("usage: torchscript_loader MODEL.pt IMAGE... [--top-k K]");
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) try {
  const Arguments args = parse(argc, argv);
  torch::jit::ExtraFilesMap extra{{"mixt.json", ""}};
  torch::jit::Module model = torch::jit::load(args.model, torch::kCPU, extra);
  model.eval();
  const ModelMetadata meta = parse_metadata(extra["mixt.json"]);
  const std::vector<Step> pipeline = read_pipeline(meta.transforms, meta.data_section);
  std::printf("model: %s (recipe %s, mixt %s), %zu classes\npreprocessing: %s\n", args.model.c_str(),
              meta.recipe.c_str(), meta.version.c_str(), meta.classes.size(), describe(pipeline).c_str());

  std::vector<torch::Tensor> samples;
  for (const std::string& path : args.images) {
    torch::Tensor sample = preprocess(pipeline, decode_image(path, meta.sample_shape.at(0)));
    if (sample.sizes().vec() != meta.sample_shape) {
      throw std::runtime_error(path + ": preprocessing gave " + c10::str(sample.sizes()) + ", the model takes " +
                               c10::str(c10::IntArrayRef(meta.sample_shape)));
    }
    samples.push_back(sample);
  }
  at::NoGradGuard no_grad;
  const torch::Tensor logits = model.forward({torch::stack(samples)}).toTensor();
  const std::int64_t k = std::min(args.top_k, logits.size(1));
  const auto [probabilities, indices] = torch::softmax(logits, 1).topk(k, 1);
  for (std::size_t i = 0; i < args.images.size(); ++i) {
    std::printf("%s\n", args.images[i].c_str());
    const auto row = static_cast<std::int64_t>(i);
    for (std::int64_t r = 0; r < k; ++r) {
      const std::int64_t index = indices[row][r].item<std::int64_t>();
      const std::string name =
          index < static_cast<std::int64_t>(meta.classes.size()) ? meta.classes[static_cast<std::size_t>(index)] : "";
      std::printf("  %lld %lld %.8f %s\n", static_cast<long long>(r + 1), static_cast<long long>(index),
                  probabilities[row][r].item<double>(), name.c_str());
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "torchscript_loader: error: %s\n", e.what());
  return 1;
}
