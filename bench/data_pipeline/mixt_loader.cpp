// The mixt side of the input-pipeline benchmark: the image_folder plugin with the standard
// ImageNet training pipeline, one epoch, timed from building the dataset (index scan
// included, as torchvision's side includes ImageFolder's) to the last batch. One JSON line.
//
// usage: mixt_bench_data_pipeline ROOT [BATCH_SIZE=256] [WORKERS=2]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "plugins/plugin_loader.h"
#include "plugins/registry.h"
#include "recipe/recipe_loader.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ROOT [BATCH_SIZE] [WORKERS]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const std::string batch_size = argc > 2 ? argv[2] : "256";
  const std::string workers = argc > 3 ? argv[3] : "2";
  try {
    mixt::Registry registry;
    mixt::PluginLoader loader(registry);
    loader.load_directory(MIXT_PLUGIN_DIR, [](const std::string& w) { std::fprintf(stderr, "%s\n", w.c_str()); });
    const auto recipe = mixt::parse_yaml("data: {name: image_folder, root: '" + root + "', batch_size: " + batch_size +
                                             ", workers: " + workers + ", transforms: imagenet_train}",
                                         "bench");
    const auto start = std::chrono::steady_clock::now();
    auto dataset = registry.make_dataset(mixt::Config(recipe, "").section("data"),
                                         mixt::DatasetContext{"train", 0, 0, 1, at::kCPU});
    dataset->start_epoch(0);
    std::int64_t images = 0;
    while (auto batch = dataset->next_batch()) images += batch->inputs.size(0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);  // every thread of the process, plugin loading included
    const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    std::printf(
        "{\"loader\": \"mixt\", \"images\": %lld, \"seconds\": %.3f, \"images_per_second\": %.1f, "
        "\"cpu_seconds\": %.3f}\n",
        static_cast<long long>(images), seconds, static_cast<double>(images) / seconds, cpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixt_bench_data_pipeline: %s\n", e.what());
    return 1;
  }
  return 0;
}
