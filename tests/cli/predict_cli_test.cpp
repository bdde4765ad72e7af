// `mixt predict --image`: a model trained on folders of coloured JPEGs names their colours,
// from the run directory, a checkpoint or exported weights, with or without the training
// data; bad images are named and skipped; the logits of a JPEG are those of torchvision's
// ImageNet evaluation pipeline with the same weights (tests/golden/make_predict_golden.py).
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "assembly/components.h"
#include "child_process.h"
#include "data_support.h"
#include "mixt/decodes_files.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "run_directories.h"
#include "shared_setup.h"
#include "test_support.h"

namespace mixt {
namespace {

const std::string kColourRecipe = R"(name: colours
model:     { name: simple_cnn, channels: [8, 16], hidden: 32 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.05, momentum: 0.9 }
data:
  train:
    name: image_folder
    root: data/train
    batch_size: 8
    workers: 0
    transforms: [{name: random_resized_crop, size: 24, scale: [0.5, 1.0]}, random_horizontal_flip, to_tensor, normalize]
  val:
    name: image_folder
    root: data/val
    batch_size: 8
    workers: 0
    transforms: [{name: resize, size: 24}, {name: center_crop, size: 24}, to_tensor, normalize]
trainer: { epochs: 3, seed: 0, threads: 1, log_every: 4 }
callbacks: [{name: ema, decay: 0.9}]
output: runs
)";

// JSON on stdout after any warnings on stderr.
nlohmann::json json_of(const CommandResult& result) {
  const auto start = result.output.find("{\n");
  if (start == std::string::npos) return {};
  return nlohmann::json::parse(result.output.substr(start, result.output.rfind('}') - start + 1));
}

// Every probability of a --json report, in order.
std::vector<double> probabilities(const nlohmann::json& report) {
  std::vector<double> p;
  for (const auto& prediction : report["predictions"]) {
    for (const auto& top : prediction["top"]) p.push_back(top["probability"]);
  }
  return p;
}

// One short training run on three colours (with an ema average), made once for the suite's
// processes; each case works in a directory of its own, whose data/ is the shared images.
class PredictCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;  // before anything can fail: the cases and TearDownTestSuite use it
    const fs::path shared =
        testing::shared_setup("predict_cli-" + testing::stable_hash(kColourRecipe), true, [](const fs::path& made) {
          testing::run_fixture_script("make_colour_folder.py", testing::shell_quote((made / "data/train").string()) +
                                                                   " --per-class 16 --seed 0");
          testing::run_fixture_script("make_colour_folder.py",
                                      testing::shell_quote((made / "data/val").string()) + " --per-class 4 --seed 1");
          std::ofstream(made / "colours.yaml") << kColourRecipe;
          const CommandResult run = run_mixt({"run", "colours.yaml"}, made);
          ASSERT_EQ(run.exit_code, 0) << run.output;
        });
    if (HasFatalFailure()) return;
    fs::create_directory_symlink(shared / "data", dir_->path() / "data");
    dir_->write("colours.yaml", kColourRecipe);
    run_ = new fs::path(testing::only_run_directory(shared / "runs" / "colours"));
  }
  static void TearDownTestSuite() {
    delete run_;
    delete dir_;
  }

  static CommandResult predict(std::vector<std::string> args) {
    args.insert(args.begin(), "predict");
    return run_mixt(args, dir_->path());
  }

  // Every image of the folder predicted as the colour of its folder, at top-1.
  static void expect_colours(const nlohmann::json& report, std::size_t images) {
    ASSERT_EQ(report["predictions"].size(), images) << report.dump(1);
    for (const auto& p : report["predictions"]) {
      const std::string image = p["image"];
      const std::string folder = fs::path(image).parent_path().filename().string();
      EXPECT_EQ(p["top"][0]["class"], folder) << report.dump(1);
    }
  }

  static TempDir* dir_;
  static fs::path* run_;
};

TempDir* PredictCli::dir_ = nullptr;
fs::path* PredictCli::run_ = nullptr;

TEST_F(PredictCli, AFolderOfImagesGetsTheColoursItWasTrainedOn) {
  // In batches of 5, 5 and 2.
  const CommandResult result = predict({run_->string(), "--image", "data/val", "--json", "--batch", "5"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt predict: 12 images ..."));
  const nlohmann::json report = json_of(result);
  expect_colours(report, 12);
  // Three classes: top-5 is capped at three, most likely first, summing to one.
  const auto& top = report["predictions"][0]["top"];
  ASSERT_EQ(top.size(), 3u);
  EXPECT_GE(top[0]["probability"].get<double>(), top[1]["probability"].get<double>());
  EXPECT_NEAR(top[0]["probability"].get<double>() + top[1]["probability"].get<double>() +
                  top[2]["probability"].get<double>(),
              1.0, 1e-5);
  EXPECT_EQ(report["skipped"].size(), 0u);
}

TEST_F(PredictCli, TheTableTheCsvAndTopK) {
  CommandResult result = predict({run_->string(), "--image", "data/val/red/00.jpg", "--image", "data/val/blue",
                                  "--top-k", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("image"));
  EXPECT_THAT(result.output, HasSubstr("probability"));
  std::istringstream lines(result.output);
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 1u + 5 * 2) << result.output;  // a header, then two rows per image
  EXPECT_THAT(rows[1], ::testing::StartsWith("data/val/red/00.jpg"));
  EXPECT_THAT(rows[1], HasSubstr("red"));
  EXPECT_THAT(rows[1], HasSubstr("%"));
  EXPECT_THAT(rows[3], ::testing::StartsWith("data/val/blue/00.jpg"));
  EXPECT_THAT(rows[3], HasSubstr("blue"));

  result = predict({run_->string(), "--image", "data/val", "--csv", "p.csv", "--top-k", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("12 images (0 skipped): top-1 classes written to p.csv"));
  const std::string csv = testing::read_file(dir_->path() / "p.csv");
  EXPECT_THAT(csv, ::testing::StartsWith("image,rank,index,class,probability\ndata/val/blue/00.jpg,1,0,blue,"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 13) << csv;
}

TEST_F(PredictCli, ACorruptImageIsNamedAndSkipped) {
  TempDir images;
  fs::copy(dir_->path() / "data/val/green", images.path() / "green");
  const std::string good = testing::read_file(images.path() / "green/00.jpg");
  images.write("green/truncated.jpg", good.substr(0, good.size() / 2));
  images.write("green/corrupt.jpg", "this is not a JPEG at all");
  images.write("green/notes.txt", "not an image file: passed over");
  const CommandResult result = predict({run_->string(), "--image", images.path().string(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: warning: skipped " + (images.path() / "green/corrupt.jpg").string()));
  EXPECT_THAT(result.output, HasSubstr("mixt: warning: skipped " + (images.path() / "green/truncated.jpg").string() +
                                       ": truncated JPEG"));
  EXPECT_THAT(result.output, Not(HasSubstr("notes.txt")));
  const nlohmann::json report = json_of(result);
  expect_colours(report, 4);
  EXPECT_EQ(report["skipped"].size(), 2u);

  // Nothing readable at all: exit 1, saying so.
  const CommandResult none = predict({run_->string(), "--image", (images.path() / "green/corrupt.jpg").string()});
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_THAT(none.output, HasSubstr("mixt: error: none of the 1 files could be read as an image"));
}

TEST_F(PredictCli, WithoutTheTrainingDataACheckpointOrExportedWeightsPredictTheSame) {
  const CommandResult from_run = predict({run_->string(), "--image", "data/val", "--json"});
  ASSERT_EQ(from_run.exit_code, 0) << from_run.output;
  const CommandResult exported = run_mixt({"export", run_->string(), "-o", "w.safetensors"}, dir_->path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  // Elsewhere, with the images but not the data folders: the run's recipe names them, and
  // neither the model nor the transforms need them; the classes come from classes.txt.
  TempDir elsewhere;
  fs::copy(dir_->path() / "data/val", elsewhere.path() / "images", fs::copy_options::recursive);
  fs::copy(*run_, elsewhere.path() / "run", fs::copy_options::recursive);
  const auto in_elsewhere = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "predict");
    return run_mixt(args, elsewhere.path());
  };
  const std::vector<double> expected = probabilities(json_of(from_run));
  const CommandResult checkpoint =
      in_elsewhere({"run/checkpoints/last", "--image", "images", "--json"});
  ASSERT_EQ(checkpoint.exit_code, 0) << checkpoint.output;
  expect_colours(json_of(checkpoint), 12);
  EXPECT_EQ(probabilities(json_of(checkpoint)), expected);

  // The exported weights under the recipe, where the data is: names from the dataset.
  const CommandResult weights =
      predict({"colours.yaml", "model.weights=w.safetensors", "--image", "data/val", "--json"});
  ASSERT_EQ(weights.exit_code, 0) << weights.output;
  expect_colours(json_of(weights), 12);
  EXPECT_EQ(probabilities(json_of(weights)), expected);
  EXPECT_EQ(json_of(weights)["model"], "w.safetensors");
}

TEST_F(PredictCli, EmaPredictsWithTheAverageAsItsExportDoes) {
  const CommandResult exported =
      run_mixt({"export", run_->string(), "--ema", "-o", "ema.safetensors"}, dir_->path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const CommandResult ema = predict({run_->string(), "--image", "data/val", "--json", "--ema"});
  ASSERT_EQ(ema.exit_code, 0) << ema.output;
  const CommandResult file = predict({"colours.yaml", "model.weights=ema.safetensors", "--image", "data/val", "--json"});
  ASSERT_EQ(file.exit_code, 0) << file.output;
  const CommandResult model = predict({run_->string(), "--image", "data/val", "--json"});
  ASSERT_EQ(model.exit_code, 0) << model.output;
  EXPECT_EQ(probabilities(json_of(ema)), probabilities(json_of(file)));
  EXPECT_NE(probabilities(json_of(ema)), probabilities(json_of(model)));
}

TEST_F(PredictCli, CtrlCStopsWithExit130) {
  // 12 images 400 times, one at a time: seconds of work to interrupt.
  std::vector<std::string> args = {
      testing::configured::mixt_executable(), "predict", run_->string(), "--batch", "1", "--csv", "c.csv"};
  for (int i = 0; i < 400; ++i) args.insert(args.end(), {"--image", "data/val"});
  testing::ChildProcess child(args, {}, dir_->path(), dir_->path() / "interrupted.txt");
  const auto said = [&] { return testing::read_file(dir_->path() / "interrupted.txt"); };
  for (int i = 0; i < 3000 && said().find("mixt predict: 4800 images") == std::string::npos; ++i) {
    ASSERT_FALSE(child.wait_for(0.01)) << said();
  }
  child.signal(SIGINT);
  EXPECT_EQ(child.wait_for(60), 130) << said();
  EXPECT_THAT(said(), HasSubstr("mixt: interrupted while predicting; nothing was written"));
  EXPECT_FALSE(fs::exists(dir_->path() / "c.csv"));
}

TEST_F(PredictCli, BadUsageIsExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{run_->string(), "--image", "x.jpg", "--input", "b.safetensors", "--output", "o.safetensors"},
       "--image and --input/--output are two ways to predict: use one"},
      {{run_->string()}, "mixt predict needs --image FILE|DIR, or --input and --output"},
      {{run_->string(), "--image", "nowhere.jpg"}, "--image nowhere.jpg: no such file or directory"},
      {{run_->string(), "--image", "data/val", "--top-k", "0"}, "--top-k must be 1 or more"},
      {{run_->string(), "--input", "b.safetensors", "--output", "o.safetensors", "--json"},
       "--transforms, --top-k, --batch, --json and --csv go with --image"},
      {{"colours.yaml", "--image", "data/val", "--ema"},
       "--ema reads the ema callback's average from a checkpoint, and colours.yaml is a recipe"},
      {{run_->string(), "--image", "data/val", "data.val=null"},
       "the recipe has no data.val section, whose dataset and evaluation transforms decode the images"},
      {{run_->string(), "--image", "data/val", "data.val={name: synthetic}"},
       "data.val's dataset 'synthetic' cannot decode image files"},
      {{run_->string(), "--image", "data/val", "--transforms", "[to_tensor, {name: normalize, mean: [0.5]}]"},
       "data.val.transforms"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult result = predict(args);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output, HasSubstr(message)) << result.output;
  }
}

TEST_F(PredictCli, TransformsReplaceDataValsAndDataTrainDecodesWithThem) {
  // The model was trained on 24x24 samples: other transforms that give them still predict.
  const std::string eval = "[{name: resize, size: 30}, {name: center_crop, size: 24}, to_tensor, normalize]";
  CommandResult result = predict({run_->string(), "--image", "data/val", "--json", "--transforms", eval});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_colours(json_of(result), 12);
  result = predict({run_->string(), "--image", "data/val", "--json", "--transforms", eval, "data.val=null"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_colours(json_of(result), 12);
}

// --- golden: torchvision's ImageNet evaluation pipeline -------------------------------

const fs::path kGoldenDir = testing::configured::predict_golden_dir();  // the weights, written by the ctest fixture

nlohmann::json golden() {
  return nlohmann::json::parse(testing::read_file(testing::source_dir() / "tests/golden/predict_image.json"));
}
fs::path golden_image() { return testing::source_dir() / "tests/fixtures/data/predict/golden.jpg"; }

double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  return (got - expected).abs().max().item<double>() / expected.abs().max().item<double>();
}

at::Tensor logits_of(const nlohmann::json& values) {
  return at::tensor(values.get<std::vector<float>>()).unsqueeze(0);
}

// image_folder's decoder and imagenet_eval (the default transforms of data.val) against
// the same JPEG through torchvision: with uint8 tensors (torchvision.io.decode_jpeg, then
// v2's Resize on the tensor: ATen's antialiased bilinear kernel, as mixt) the logits
// agree to float rounding (3e-7 measured; not bitwise); through PIL
// (ImageFolder's loader) the resize rounds differently, by at most 1 grey level on this
// image, which moves the logits by 3.9e-5 of their range: the documented tolerance is 1e-4.
TEST(PredictGolden, LogitsEqualTorchvisionsImageNetEvalPipeline) {
  at::set_num_threads(1);
  testing::BuiltPlugins plugins;
  const std::unique_ptr<Dataset> dataset =
      testing::make_dataset(plugins, "{name: image_folder}", DatasetContext{kPredictSplit, 0, 0, 1, at::kCPU});
  const DecodesFiles* decoder = file_decoder_of(*dataset);
  ASSERT_NE(decoder, nullptr);
  EXPECT_EQ(dataset->sample_shape(), (std::vector<std::int64_t>{3, 224, 224}));
  const at::Tensor input = decoder->decode_file(golden_image().string());

  const auto recipe = parse_yaml("model: {name: resnet18, weights: " + (kGoldenDir / "resnet18.safetensors").string() + "}",
                                 "test.yaml");
  const std::shared_ptr<Model> model =
      build_model(Config(recipe, "").section("model"), plugins.registry, ModelContext{at::kCPU, {3, 224, 224}, 0});
  model->eval();
  at::NoGradGuard no_grad;
  const at::Tensor logits = model->forward(input.unsqueeze(0));
  const nlohmann::json reference = golden();
  const double tensor = relative_error(logits, logits_of(reference["logits_tensor"]));
  const double pil = relative_error(logits, logits_of(reference["logits_pil"]));
  EXPECT_LE(tensor, 1e-5);
  EXPECT_LE(pil, 1e-4);
  std::printf("relative difference of the logits: %.3g vs torchvision on tensors, %.3g vs PIL\n", tensor, pil);
}

// The same through the program: its top-5 are the reference's, with its probabilities.
TEST(PredictGolden, TheProgramPrintsTheReferencesTopFive) {
  TempDir dir;
  dir.write("r.yaml", "model: {name: resnet18, weights: " + (kGoldenDir / "resnet18.safetensors").string() +
                          "}\ndata:\n  val: {name: image_folder, root: /nowhere, transforms: imagenet_eval}\n");
  const CommandResult result = run_mixt({"predict", "r.yaml", "--image", golden_image().string(), "--json"}, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json report = json_of(result);
  // The tensor pipeline's order: PIL's resize could swap two classes a hair apart.
  const at::Tensor probabilities = at::softmax(logits_of(golden()["logits_tensor"]), 1)[0];
  const auto [expected, classes] = probabilities.topk(5);
  const auto& top = report["predictions"][0]["top"];
  ASSERT_EQ(top.size(), 5u) << result.output;
  for (std::int64_t r = 0; r < 5; ++r) {
    EXPECT_EQ(top[r]["index"].get<std::int64_t>(), classes[r].item<std::int64_t>()) << result.output;
    EXPECT_TRUE(top[r]["class"].is_null());  // no classes.txt, no class folders: indices only
    EXPECT_NEAR(top[r]["probability"].get<double>(), expected[r].item<double>(), 1e-4);
  }
}

}  // namespace
}  // namespace mixt
