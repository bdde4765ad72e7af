#include "assembly/trainer_options.h"

#include <algorithm>
#include <optional>

#include "mixt/options.h"

namespace mixt {

namespace {
using T = TrainerOptions;

// Each key of `trainer:` once: its default is the field's initialiser (trainer_options.h),
// and its help is what `mixt describe trainer` prints and docs/recipes.md's table shows (a
// test keeps the table equal to these).
const OptionsOf<TrainerOptions>& bound() {
  static const auto options =
      OptionsOf<T>()
          .add(&T::epochs, "epochs", "epochs to train in all (when resuming too: the total, not how many more)",
               at_least(1))
          .add(&T::device, "device", "`auto` (CUDA when usable, else CPU), `cpu`, `cuda` (= `cuda:0`), `cuda:N`")
          .add(&T::seed, "seed",
               "seeds model initialisation and the data order; runs on CPU are bitwise reproducible at the same "
               "`threads`")
          // A million threads made even `mixt check` hang (ATen starts them at once).
          .add(&T::threads, "threads", "intra-op threads (0 = LibTorch's default)", between(0, 1024))
          .add(&T::log_every, "log_every", "optimizer steps between metric lines (and plain progress lines)",
               at_least(1))
          .add(&T::accumulate, "accumulate", "micro-batches per optimizer step (the loss is divided by it)",
               at_least(1))
          .add(&T::clip_grad_norm, "clip_grad_norm",
               "clip the global gradient norm to this (0 = off); gradients are unscaled first", at_least(0))
          .add(&T::grad_norm, "grad_norm",
               "when the global gradient norm (before clipping, of the gradients the optimizer steps on, unscaled) "
               "is computed: `logged` (on `log_every` steps, where metrics.jsonl's `grad_norm` records it, and on "
               "every step when clipping) or `every_step` (a callback that reads `StepEnd::grad_norm` on every step "
               "asks for that itself: `reads_grad_norm_every_step()`). Computed on the device: no synchronisation "
               "until something reads it",
               one_of({"logged", "every_step"}))
          .add(&T::max_steps_per_epoch, "max_steps_per_epoch",
               "stop an epoch after this many optimizer steps (0 = whole dataset)", at_least(0))
          .add(&T::keep_checkpoints, "keep_checkpoints",
               "per-epoch checkpoints kept (`last` always points at the newest)", at_least(1))
          .add(&T::resume, "resume",
               "a checkpoint file, a run directory or its `checkpoints/` to continue from (a directory: its newest "
               "checkpoint, `interrupted` if there is one, else `last`, else the highest `epoch-NNNN`); `mixt check` "
               "reads it too")
          .add(&T::channels_last, "channels_last",
               "NHWC memory format for the model's 4-D parameters and buffers and for 4-D inputs")
          .add(&T::cudnn_benchmark, "cudnn_benchmark",
               "let cuDNN time convolution algorithms and keep the fastest (GPU only)")
          .add(&T::stop_on_nonfinite_loss, "stop_on_nonfinite_loss",
               "stop (exit 1) when a step the precision policy applied had an inf/NaN loss, before any checkpoint "
               "holds the broken weights; steps a loss scaler skipped do not count. Checked where the loss is read "
               "anyway (log and progress lines, epoch ends, before a checkpoint), so it adds no per-step GPU "
               "synchronisation; `mixt bench` turns it off and marks the row instead")
          .word_or_list<ActivationCheckpointing>(
              &T::activation_checkpointing, "activation_checkpointing", {"none", "all"}, "none", "submodule names",
              "recompute instead of keeping activations: `all` (every block the model routes with "
              "`mixt::call_block`: ResNet's `stem` and `layer1.0` … `layer4.2`, ViT's encoder layers, the "
              "`features.N` of ConvNeXt, EfficientNet and MobileNet, VGG's and `simple_cnn`'s `features`) or a list "
              "of submodule names (`[layer2, layer4.1]`, any name the model routes, as `precision.fp32_modules` "
              "takes them). Bitwise the same training, less memory, about one more forward pass of time; see "
              "[memory.md](memory.md)",
              [](const WordOrList& given) {
                return ActivationCheckpointing{given.word == "all", given.names};
              });
  return options;
}

}  // namespace

TrainerOptions TrainerOptions::read(const Config& s) {
  // The loss belongs to the task (since ABI 6): say where the key went rather than "unknown key".
  const std::vector<std::string> given = s.keys();  // keys(), not has(): the old key must not become a known one
  if (std::find(given.begin(), given.end(), "label_smoothing") != given.end()) {
    s.fail("label_smoothing", "label smoothing is an option of the task now, not of the trainer",
           "move it: task: {name: classification, label_smoothing: 0.1} (causal_lm takes it too)");
  }
  TrainerOptions o = bound().read(s);
  o.distributed = distributed::DistributedOptions::read(s.section("distributed"));
  return o;
}

std::vector<OptionDoc> trainer_option_docs() {
  std::vector<OptionDoc> docs = bound().docs();
  for (OptionDoc doc : distributed::DistributedOptions::docs()) {
    doc.name = "distributed." + doc.name;
    docs.push_back(std::move(doc));
  }
  return docs;
}

at::Device resolve_device(const std::string& text, const Config& section) {
  const bool cuda_usable = at::hasCUDA() && at::getNumGPUs() > 0;
  if (text == "auto") return cuda_usable ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  if (text == "cpu") return at::kCPU;
  if (text.rfind("cuda", 0) == 0) {
    if (!cuda_usable) {
      section.fail("device", "'" + text + "' requested, but no CUDA device is usable here",
                   "use device: cpu, or device: auto");
    }
    std::optional<at::Device> device;
    try {
      device = at::Device(text);
    } catch (const std::exception&) {
      section.fail("device", "not a device: '" + text + "'", "write cuda or cuda:N");
    }
    // Always with an index: the allocator statistics and stream calls take one, and reject -1.
    if (!device->has_index()) return at::Device(at::kCUDA, 0);
    const int gpus = static_cast<int>(at::getNumGPUs());
    if (device->index() >= gpus) {
      section.fail("device",
                   "'" + text + "' requested, but this machine has " + std::to_string(gpus) + " usable GPU(s)",
                   "use cuda:0 to cuda:" + std::to_string(gpus - 1));
    }
    return *device;
  }
  section.fail("device", "unknown device '" + text + "'", "use auto, cpu, cuda or cuda:N");
}

}  // namespace mixt
