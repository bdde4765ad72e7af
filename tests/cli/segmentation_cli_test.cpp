// Semantic segmentation end to end, added without a change under framework/: the shipped
// recipe (recipes/segmentation/shapes.yaml: lraspp_mobilenet_v3_large on the synthetic
// shapes, the segmentation task) trains, and `mixt evaluate` of its checkpoint — mean IoU,
// pixel accuracy, per-class IoU, the confusion matrix — equals what torchvision's
// segmentation reference computes (tests/support/segmentation_reference.py) from the
// TorchScript export of the same checkpoint on the same validation images.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mixt/helpers/safetensors.h>

#include <nlohmann/json.hpp>

#include "plugins.h"
#include "run_directories.h"
#include "json_output.h"
#include "test_support.h"

namespace mixt {
namespace {

const std::string kRecipe = testing::configured::source_dir() + "/recipes/segmentation/shapes.yaml";

// data.val of the recipe (size 500, seed 0), as the dataset serves it, into `file`.
void write_validation_data(const fs::path& file) {
  const testing::BuiltPlugins plugins;
  const Config section(parse_yaml("{name: shapes, size: 500, batch_size: 100}", "test"), "val");
  const std::unique_ptr<Dataset> val = plugins.registry.make_dataset(section, DatasetContext{"val", 0, 0, 1, at::kCPU});
  std::vector<at::Tensor> images, masks;
  val->start_epoch(0);
  while (auto batch = val->next_batch()) {
    images.push_back(batch->inputs);
    masks.push_back(batch->targets);
  }
  save_safetensors(file, {{"images", at::cat(images)}, {"masks", at::cat(masks)}});
}

TEST(SegmentationCli, TheShapesRecipeTrainsAndEvaluateIsTorchvisionsReference) {
  TempDir dir;
  // Shorter than the recipe's 20 epochs (6 of its 2,000 images: 750 steps); the same data.val.
  const CommandResult run =
      run_mixt({"run", kRecipe, "output=" + (dir.path() / "runs").string(), "trainer.epochs=6", "trainer.threads=2"},
               dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("pixels/s"));  // the task counts pixels for speed
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs/shapes");
  int best = 0;  // best_checkpoint watches val_miou, a figure only the task knows
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints")) {
    best += entry.path().filename().string().rfind("best-epoch-", 0) == 0;
  }
  EXPECT_GE(best, 1);

  const CommandResult evaluated = run_mixt({"evaluate", run_dir.string(), "--json"}, dir.path());
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  const nlohmann::json report = testing::json_document(evaluated.output);
  ASSERT_EQ(report["samples"], 500);
  const CommandResult table = run_mixt({"evaluate", run_dir.string(), "--per-class"}, dir.path());
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("per-class IoU (pixels):"));
  EXPECT_THAT(table.output, HasSubstr("ellipse"));

  const CommandResult exported = run_mixt({"export", run_dir.string(), "-o", "m.pt"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  write_validation_data(dir.path() / "val.safetensors");
  const fs::path results = dir.path() / "reference.json";
  const CommandResult reference = testing::run_command(
      testing::shell_quote(MIXT_PYTHON) + " " +
      testing::shell_quote((testing::source_dir() / "tests/support/segmentation_reference.py").string()) + " " +
      testing::shell_quote((dir.path() / "m.pt").string()) + " " +
      testing::shell_quote((dir.path() / "val.safetensors").string()) + " " + testing::shell_quote(results.string()));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const nlohmann::json r = nlohmann::json::parse(testing::read_file(results));

  // Six epochs learn the shapes well past the background alone (mIoU 0.20 until the backbone's
  // slow batch-norm statistics settle; 0.57 measured after 750 steps).
  const double miou = report["miou"].get<double>();
  EXPECT_GT(miou, 0.4);
  // The same predictions but where two logits are within float rounding of each other.
  std::int64_t differing = 0, pixels = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t j = 0; j < 4; ++j) {
      differing += std::abs(report["confusion"][i][j].get<std::int64_t>() - r["confusion"][i][j].get<std::int64_t>());
      pixels += r["confusion"][i][j].get<std::int64_t>();
    }
  }
  EXPECT_EQ(pixels, 500 * 64 * 64);
  EXPECT_LE(differing, 2 * r["near_ties"].get<std::int64_t>()) << report["confusion"] << " vs " << r["confusion"];
  EXPECT_NEAR(miou, r["miou"].get<double>(), 1e-4);
  EXPECT_NEAR(report["pixel_accuracy"].get<double>(), r["pixel_accuracy"].get<double>(), 1e-5);
  EXPECT_NEAR(report["loss"].get<double>(), r["loss"].get<double>(), 1e-4);
  for (std::size_t c = 0; c < 4; ++c) {
    EXPECT_NEAR(report["per_class"][c]["iou"].get<double>(), r["iou"][c].get<double>(), 1e-4) << "class " << c;
  }
  EXPECT_EQ(report["per_class"][2]["class"], "ellipse");
  std::cout << "[ measured ] shapes, 6 epochs of 2,000 images: mixt evaluate mIoU " << miou << ", pixel accuracy "
            << report["pixel_accuracy"] << "; torchvision's reference on the TorchScript export mIoU " << r["miou"]
            << " (pixels that differ: " << differing << ", near ties " << r["near_ties"] << ")\n";
}

}  // namespace
}  // namespace mixt
