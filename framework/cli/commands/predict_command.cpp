#include "commands/predict_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/interrupt.h"
#include "experiment/inference.h"
#include "experiment/model_source.h"
#include "experiment/session.h"
#include "files/output_files.h"
#include "files/weights_export.h"
#include "mixt/decodes_files.h"
#include "mixt/helpers/safetensors.h"
#include "reports/evaluation_report.h"
#include "reports/prediction_images.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {

// One image's best classes, most likely first.
struct Prediction {
  std::string image;
  std::vector<std::int64_t> classes;
  std::vector<double> probabilities;
  std::string drawn;  // the file the task drew the prediction into, if any
};

int predict_tensor(const PredictOptions& options, const ModelTarget& target, const ModelPlan& plan,
                   const Registry& registry, const InferenceSettings& settings) {
  const SafetensorsContents file = load_safetensors(options.input);
  const at::Tensor* batch = nullptr;
  for (const auto& [name, tensor] : file.tensors) {
    if (name == "input" || file.tensors.size() == 1) batch = &tensor;
  }
  if (!batch) {
    throw Error(ErrorKind::recipe, "expected one tensor, or one named 'input'", SourceLocation{options.input}, {},
                "save the batch as {\"input\": tensor}");
  }
  if (batch->dim() < 2) {
    throw Error(ErrorKind::recipe, "the input must be a batch (N x sample dimensions)", SourceLocation{options.input});
  }
  const std::vector<std::int64_t> shape = batch->sizes().slice(1).vec();
  // A model that takes its class count from the data (a plugin reading ModelContext::num_classes)
  // gets the run's: no dataset is opened here.
  const auto classes = static_cast<std::int64_t>(run_class_names(target).size());
  const Inference inference(
      plan, registry, settings, shape, classes,
      {options.input, " (its first dimension, " + std::to_string(batch->size(0)) + ", is the batch)"}, options.ema,
      "predict");
  const at::Tensor result = inference.forward(*batch);
  save_safetensors(options.output, {{"output", result.to(at::kCPU).contiguous()}});
  std::printf("%s: input %s -> output %s written to %s\n", options.target.c_str(), c10::str(batch->sizes()).c_str(),
              c10::str(result.sizes()).c_str(), options.output.c_str());
  return 0;
}

// The data section whose dataset decodes the images: data.val (its evaluation
// transforms), or data.train's with --transforms when there is no data.val.
std::string decoding_section(Recipe& recipe, const std::string& transforms) {
  const Config data = recipe.config().section("data");
  std::string split;
  if (data.has("val")) {
    split = "val";
  } else if (!transforms.empty() && data.has("train")) {
    split = "train";
  } else {
    throw usage_error("the recipe has no data.val section, whose dataset and evaluation transforms decode the images",
                      data.has("train") ? "name the transforms with --transforms, e.g. --transforms imagenet_eval "
                                          "(data.train's dataset then decodes)"
                                        : "add one, e.g. data.val={name: image_folder, transforms: imagenet_eval}");
  }
  if (!transforms.empty()) apply_override(*recipe.root, "data." + split + ".transforms=" + transforms);
  return split;
}

// The files of --image: a file as it is named, a folder's files the dataset takes, walked
// in sorted order.
std::vector<std::string> image_files(const std::vector<std::string>& arguments, const DecodesFiles& decoder) {
  std::vector<std::string> files;
  for (const std::string& argument : arguments) {
    std::error_code ec;
    if (fs::is_directory(argument, ec)) {
      std::vector<std::string> found;
      fs::recursive_directory_iterator it(argument, fs::directory_options::follow_directory_symlink, ec);
      for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code probe;
        if (it->is_regular_file(probe) && decoder.takes_file(it->path().string())) found.push_back(it->path().string());
      }
      if (ec) throw runtime_error("--image " + argument + ": cannot read the folder: " + ec.message());
      std::sort(found.begin(), found.end());
      if (found.empty()) warn("--image " + argument + ": no image files in this folder");
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(argument, ec)) {
      files.push_back(argument);
    } else {
      throw usage_error("--image " + argument + ": no such file or directory", "name an image file or a folder of them");
    }
  }
  return files;
}

// Names for the model's outputs: the run's classes.txt, else the dataset's, else none.
std::vector<std::string> output_names(const ModelTarget& target, Dataset& dataset, std::int64_t outputs) {
  std::vector<std::string> names = run_class_names(target);
  if (static_cast<std::int64_t>(names.size()) == outputs) return names;
  names = class_names_of(dataset);
  if (static_cast<std::int64_t>(names.size()) == outputs) return names;
  return {};
}

std::string name_of(const std::vector<std::string>& names, std::int64_t index) {
  return names.empty() ? std::to_string(index) : names[static_cast<std::size_t>(index)];
}

std::string percent(double p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f%%", 100.0 * p);
  return text;
}

std::string table(const std::vector<Prediction>& predictions, const std::vector<std::string>& names) {
  std::size_t image_width = 5, class_width = 5;
  for (const Prediction& p : predictions) {
    image_width = std::max(image_width, p.image.size());
    for (std::int64_t c : p.classes) class_width = std::max(class_width, name_of(names, c).size());
  }
  std::string out;
  char line[4096];
  const int iw = static_cast<int>(image_width), cw = static_cast<int>(class_width);
  std::snprintf(line, sizeof(line), "%-*s  %-*s  %11s\n", iw, "image", cw, "class", "probability");
  out += line;
  for (const Prediction& p : predictions) {
    for (std::size_t r = 0; r < p.classes.size(); ++r) {
      std::snprintf(line, sizeof(line), "%-*s  %-*s  %11s\n", iw, r == 0 ? p.image.c_str() : "", cw,
                    name_of(names, p.classes[r]).c_str(), percent(p.probabilities[r]).c_str());
      out += line;
    }
  }
  return out;
}

std::string csv(const std::vector<Prediction>& predictions, const std::vector<std::string>& names) {
  std::string out = "image,rank,index,class,probability\n";
  char number[32];
  for (const Prediction& p : predictions) {
    for (std::size_t r = 0; r < p.classes.size(); ++r) {
      std::snprintf(number, sizeof(number), "%.6f", p.probabilities[r]);
      out += csv_field(p.image) + "," + std::to_string(r + 1) + "," + std::to_string(p.classes[r]) + "," +
             csv_field(name_of(names, p.classes[r])) + "," + number + "\n";
    }
  }
  return out;
}

nlohmann::json json(const std::vector<Prediction>& predictions, const std::vector<std::string>& names,
                    const nlohmann::json& skipped, const std::string& source) {
  nlohmann::json out = {{"model", source}, {"predictions", nlohmann::json::array()}, {"skipped", skipped}};
  for (const Prediction& p : predictions) {
    nlohmann::json top = nlohmann::json::array();
    for (std::size_t r = 0; r < p.classes.size(); ++r) {
      top.push_back({{"index", p.classes[r]},
                     {"class", names.empty() ? nlohmann::json(nullptr) : nlohmann::json(names[p.classes[r]])},
                     {"probability", p.probabilities[r]}});
    }
    out["predictions"].push_back({{"image", p.image}, {"top", top}});
    if (!p.drawn.empty()) out["predictions"].back()["drawn"] = p.drawn;
  }
  return out;
}

int predict_images(const PredictOptions& options, const ModelTarget& target, ModelPlan& plan,
                   const Registry& registry, const InferenceSettings& settings) {
  const std::string split = decoding_section(plan.recipe, options.transforms);
  const Config section = plan.recipe.config().section("data").section(split);
  const std::unique_ptr<Dataset> dataset =
      registry.make_dataset(section, DatasetContext{kPredictSplit, settings.seed, 0, 1, settings.device});
  const DecodesFiles* decoder = file_decoder_of(*dataset);
  if (!decoder) {
    throw usage_error("data." + split + "'s dataset '" + section.string("name", "") +
                          "' cannot decode image files (it is no mixt::DecodesFiles)",
                      "use a dataset that reads files, e.g. data.val={name: image_folder, transforms: imagenet_eval}, "
                      "or give the model a tensor with --input and --output");
  }
  const std::vector<std::string> files = image_files(options.images, *decoder);
  if (files.empty()) {
    throw runtime_error("no image files to predict on", "name image files (.jpg, .png, ...) or folders that hold them");
  }
  // The class count when the recipe leaves it to the data: the run's, else the data's.
  std::int64_t classes = static_cast<std::int64_t>(run_class_names(target).size());
  if (classes == 0) classes = dataset->num_classes();
  const Inference inference(plan, registry, settings, dataset->sample_shape(), classes,
                            {"data." + split + "'s transforms", ""}, options.ema, "predict");
  PredictionImages drawings(registry, plan.recipe.config(), classes, options.draw_dir);

  if (files.size() > static_cast<std::size_t>(options.batch)) {
    // On stderr, so that --json's stdout stays one document: a large folder takes minutes.
    std::fprintf(stderr, "mixt predict: %zu images ...\n", files.size());
  }
  std::vector<Prediction> predictions;
  nlohmann::json skipped = nlohmann::json::array();
  std::vector<std::string> names;
  std::int64_t outputs = -1;
  for (std::size_t first = 0; first < files.size(); first += static_cast<std::size_t>(options.batch)) {
    if (interrupt_requested()) throw Error(ErrorKind::interrupted, "interrupted while predicting; nothing was written");
    std::vector<at::Tensor> inputs;
    std::vector<std::string> decoded;
    const std::size_t end = std::min(files.size(), first + static_cast<std::size_t>(options.batch));
    for (std::size_t i = first; i < end; ++i) {
      try {
        inputs.push_back(decoder->decode_file(files[i]));
        decoded.push_back(files[i]);
      } catch (const std::exception& e) {  // the loader's rule: a bad image is named and skipped
        const std::string why = e.what();
        warn("skipped " + (why.rfind(files[i], 0) == 0 ? why : files[i] + ": " + why));
        skipped.push_back({{"image", files[i]}, {"reason", why}});
      }
    }
    if (inputs.empty()) continue;
    const at::Tensor logits = inference.forward(at::stack(inputs)).to(at::kCPU, at::kFloat);
    if (outputs < 0) {
      outputs = logits.size(1);
      names = output_names(target, *dataset, outputs);
    }
    const std::int64_t k = std::min<std::int64_t>(options.top_k, outputs);
    const auto [probabilities, indices] = class_probabilities(logits).topk(k, 1);
    for (std::size_t i = 0; i < decoded.size(); ++i) {
      Prediction p{decoded[i], {}, {}, drawings.write(decoded[i], logits[static_cast<std::int64_t>(i)])};
      for (std::int64_t r = 0; r < k; ++r) {
        const auto row = static_cast<std::int64_t>(i);
        p.classes.push_back(indices[row][r].item<std::int64_t>());
        p.probabilities.push_back(probabilities[row][r].item<double>());
      }
      predictions.push_back(std::move(p));
    }
  }
  if (predictions.empty()) {
    throw runtime_error("none of the " + std::to_string(files.size()) + " files could be read as an image",
                        "the warnings above say why for each");
  }

  const std::string source = weights_source(plan, options.target);
  if (!options.csv.empty()) {
    write_file(options.csv, csv(predictions, names));
  }
  if (options.json) {
    std::printf("%s\n", json(predictions, names, skipped, source).dump(2).c_str());
  } else if (options.csv.empty()) {
    std::printf("%s", table(predictions, names).c_str());
    for (const Prediction& p : predictions) {
      if (!p.drawn.empty()) std::printf("%s: drawn in %s\n", p.image.c_str(), p.drawn.c_str());
    }
  } else {
    std::printf("%zu images (%zu skipped): top-%lld classes written to %s\n", predictions.size(), skipped.size(),
                static_cast<long long>(std::min<std::int64_t>(options.top_k, outputs)), options.csv.c_str());
  }
  return 0;
}

}  // namespace

int predict(const PredictOptions& options) {
  const bool images = !options.images.empty();
  const bool tensors = !options.input.empty() || !options.output.empty();
  if (images == tensors) {
    throw usage_error(images ? "--image and --input/--output are two ways to predict: use one"
                             : "mixt predict needs --image FILE|DIR, or --input and --output",
                      "mixt predict RUN --image photo.jpg (the top classes), or mixt predict RECIPE --input "
                      "batch.safetensors --output logits.safetensors (a tensor)");
  }
  if (tensors) {
    if (options.input.empty() || options.output.empty()) {
      throw usage_error(std::string(options.input.empty() ? "--output" : "--input") + " needs " +
                            (options.input.empty() ? "--input" : "--output") + " as well",
                        "mixt predict RECIPE --input batch.safetensors --output logits.safetensors");
    }
    if (options.image_options_given) {
      throw usage_error("--transforms, --top-k, --batch, --json and --csv go with --image, as does --draw-dir",
                        "mixt predict with --input writes the model's outputs as they are");
    }
    refuse_pickle_name("--output", options.output, "mixt predict");
  } else {
    if (options.top_k < 1) throw usage_error("--top-k must be 1 or more, got " + std::to_string(options.top_k));
    if (options.batch < 1) throw usage_error("--batch must be 1 or more, got " + std::to_string(options.batch));
    check_writable("--csv", options.csv);
  }
  const ModelTarget target = resolve_model_target(options.target, "predict", options.best);
  if (images) install_interrupt_handlers("mixt: stopping (again to quit at once)");
  ModelPlan plan = plan_model(target, options.overrides, options.ema);
  Session session;
  session.load_plugins_of(plan.recipe);
  const InferenceSettings settings = InferenceSettings::read(plan.recipe);
  if (tensors) return predict_tensor(options, target, plan, session.registry(), settings);
  return predict_images(options, target, plan, session.registry(), settings);
}

void add_predict_command(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* command = app.add_subcommand(
      "predict", "run trained weights on images (the top classes, by name) or on a tensor (safetensors in and out)");
  command
      ->add_option("target", o->target,
                   "a run directory, its checkpoints/ or a checkpoint file (each brings its recipe.yaml), or a "
                   "recipe with model.weights=FILE.safetensors")
      ->required();
  command->add_option("overrides", o->overrides, "key=value overrides, e.g. model.weights=w.safetensors");
  command
      ->add_option("--image", o->images,
                   "an image file, or a folder of them (walked; repeat for more): decoded by data.val's dataset, "
                   "through its evaluation transforms")
      ->allow_extra_args(false);
  command->add_option("--transforms", o->transforms,
                      "transforms instead of data.val's, as YAML: a preset (imagenet_eval) or a list");
  command->add_option("--top-k", o->top_k, "classes shown per image (at most the class count)")->capture_default_str();
  command->add_option("--batch", o->batch, "images per forward pass")->capture_default_str();
  command->add_flag("--json", o->json, "the predictions (and the images skipped) as JSON on stdout");
  command->add_option("--csv", o->csv, "write the predictions to FILE: image,rank,index,class,probability");
  command->add_option("--draw-dir", o->draw_dir,
                      "where a task that draws its predictions (segmentation: a colour mask) writes "
                      "<image>.<kind>.png; default: the current directory");
  command->add_flag("--ema", o->ema, "the ema callback's average of the weights (from a checkpoint)");
  command->add_flag("--best", o->best, kBestHelp);
  command->add_option("--input", o->input,
                      "instead of --image: a safetensors file with the input batch (N x C x H x W, transformed)");
  command->add_option("--output", o->output, "with --input: the safetensors file to write the outputs to");
  commands.push_back(
      {command, [o, command] {
         for (const char* option : {"--transforms", "--top-k", "--batch", "--json", "--csv", "--draw-dir"}) {
           if (command->count(option) > 0) o->image_options_given = true;
         }
         return predict(*o);
       }});
}

}  // namespace mixt::cli
