#include "weights_commands.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "build/components.h"
#include "build/experiment.h"
#include "build/session.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_weights.h"
#include "commands.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "mixt/version.h"
#include "train/trainer_options.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {
// A model.pth that torch.load cannot read would fail far from here, in someone's script.
void refuse_pickle_name(const std::string& option, const std::string& output, const std::string& command) {
  std::string extension = fs::path(output).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* pickle : {".pt", ".pth", ".bin", ".ckpt", ".pkl"}) {
    if (extension == pickle) {
      throw usage_error(option + " " + output + ": " + command + " writes safetensors, which torch.load cannot read",
                        "name it " + fs::path(output).replace_extension(".safetensors").string() +
                            " (in Python: safetensors.torch.load_file" +
                            (command == "mixt export" ? ", then model.load_state_dict)" : ")"));
    }
  }
}
}  // namespace

int export_weights(const std::string& checkpoint, const std::string& format, const std::string& output, bool ema,
                   bool best) {
  if (format != "safetensors") {
    throw usage_error("unknown export format '" + format + "'", "mixt export writes --format safetensors");
  }
  refuse_pickle_name("-o", output, "mixt export");
  const fs::path file = best ? resolve_best_checkpoint(checkpoint) : resolve_checkpoint(checkpoint, "checkpoint");
  CheckpointContents contents = read_checkpoint(file);
  NamedTensors tensors = checkpoint_weights(contents, file, ema);
  // float32, as torchvision's weights are: a bfloat16 or float16 tensor (a bf16_true model,
  // a master-weight policy's buffers) widens exactly.
  for (auto& item : tensors) {
    if (item.second.scalar_type() == at::kHalf || item.second.scalar_type() == at::kBFloat16) {
      item.second = item.second.to(at::kFloat);
    }
  }
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"source", "mixt " + std::string(version())}};
  if (contents.header.contains("components")) metadata["mixt_components"] = contents.header["components"].dump();
  save_safetensors(output, tensors, metadata);
  std::int64_t values = 0;
  for (const auto& item : tensors) values += item.second.numel();
  std::printf("wrote %zu tensors (%lld values) from %s to %s\n", tensors.size(), static_cast<long long>(values),
              file.string().c_str(), output.c_str());
  return 0;
}

int predict(const std::string& recipe_file, const std::vector<std::string>& overrides, const std::string& input,
            const std::string& output) {
  refuse_pickle_name("--output", output, "mixt predict");
  Session session;
  const Recipe recipe = load_recipe(recipe_file, overrides);
  session.load_plugins_of(recipe);
  Registry& registry = session.registry();
  const Config root = recipe.config();
  const Config trainer = root.section("trainer");
  const TrainerOptions defaults;  // the trainer's own defaults, without reading its whole section
  const at::Device device = resolve_device(trainer.string("device", defaults.device), trainer);

  const SafetensorsContents file = load_safetensors(input);
  const at::Tensor* batch = nullptr;
  for (const auto& [name, tensor] : file.tensors) {
    if (name == "input" || file.tensors.size() == 1) batch = &tensor;
  }
  if (!batch) {
    throw Error(ErrorKind::recipe, "expected one tensor, or one named 'input'", SourceLocation{input}, {},
                "save the batch as {\"input\": tensor}");
  }
  if (batch->dim() < 2) {
    throw Error(ErrorKind::recipe, "the input must be a batch (N x sample dimensions)", SourceLocation{input});
  }
  // The model learns its input shape from the batch, not from the recipe's datasets, which
  // predict never opens; num_classes comes from the model section (or the model's default).
  ModelContext context{device, batch->sizes().slice(1).vec(), 0};
  const Config model_section = root.section("model");
  if (!model_section.has("weights")) {
    warn("model.weights is not set: these outputs come from untrained (seed 0) weights; name the weights with "
         "model.weights=FILE.safetensors (mixt export writes one from a checkpoint)");
  }
  at::manual_seed(0);
  std::shared_ptr<Model> model;
  try {
    model = build_model(model_section, registry, context);
  } catch (const Error& e) {
    // The sample shape came from --input, not from the recipe: say so, or a batch without
    // its batch dimension reads as a recipe or weights mistake.
    throw Error(e.kind(), e.message(), e.where(), e.key_path(),
                (e.hint().empty() ? "" : e.hint() + "\n  note: ") +
                    "mixt predict builds the model for the samples of " +
                    input + ": " + c10::str(at::IntArrayRef(context.sample_shape)) + " (its first dimension, " +
                    std::to_string(batch->size(0)) + ", is the batch)" +
                    (model_section.has("num_classes")
                         ? std::string()
                         : " and, not opening the datasets, with the model's default class count: set "
                           "model.num_classes=N to the training data's (a run directory's recipe.yaml states it)"));
  }
  // Only the model is built here, so only its section is checked: a misspelt
  // model.weigths predicted with untrained weights and exit 0.
  check_unknown_keys(*recipe.root, "model");
  model->to(device);
  model->eval();
  at::Tensor result;
  {
    at::NoGradGuard no_grad;
    at::Tensor x = batch->to(device, at::kFloat);
    if (trainer.boolean("channels_last", defaults.channels_last) && x.dim() == 4) {
      x = x.contiguous(at::MemoryFormat::ChannelsLast);
    }
    result = model->forward(x);
  }
  save_safetensors(output, {{"output", result.to(at::kCPU).contiguous()}});
  std::printf("%s: input %s -> output %s written to %s\n", recipe_file.c_str(), c10::str(batch->sizes()).c_str(),
              c10::str(result.sizes()).c_str(), output.c_str());
  return 0;
}

}  // namespace mixt::cli
