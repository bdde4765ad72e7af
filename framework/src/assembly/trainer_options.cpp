#include "assembly/trainer_options.h"

#include <optional>

#include "mixt/options.h"

namespace mixt {

namespace {
using T = TrainerOptions;

// Each key of `trainer:` once: its default is the field's initialiser (trainer_options.h).
const OptionsOf<TrainerOptions>& bound() {
  static const auto options =
      OptionsOf<T>()
          .add(&T::epochs, "epochs", "epochs to train (the total, also when resuming)", at_least(1))
          .add(&T::device, "device", "auto (CUDA when usable, else CPU), cpu, cuda (= cuda:0) or cuda:N")
          .add(&T::seed, "seed", "seeds model initialisation and the data order")
          // A million threads made even `mixt check` hang (ATen starts them at once).
          .add(&T::threads, "threads", "intra-op threads (0 = LibTorch's default)", between(0, 1024))
          .add(&T::log_every, "log_every", "optimizer steps between metric lines", at_least(1))
          .add(&T::accumulate, "accumulate", "micro-batches per optimizer step", at_least(1))
          .add(&T::clip_grad_norm, "clip_grad_norm", "clip the global gradient norm to this (0 = off), after unscaling",
               at_least(0))
          .add(&T::grad_norm, "grad_norm",
               "when the gradient norm is computed for callbacks and metrics: logged (logged steps, and every "
               "step when clipping) or every_step",
               one_of({"logged", "every_step"}))
          .add(&T::max_steps_per_epoch, "max_steps_per_epoch",
               "stop an epoch after this many optimizer steps (0 = whole dataset)", at_least(0))
          .add(&T::keep_checkpoints, "keep_checkpoints", "per-epoch checkpoints kept (last always points at the newest)",
               at_least(1))
          .add(&T::resume, "resume", "checkpoint file, run directory or its checkpoints/ to continue from")
          .add(&T::label_smoothing, "label_smoothing", "cross-entropy label smoothing in [0, 1)",
               at_least(0) && below(1))
          .add(&T::channels_last, "channels_last", "NHWC memory format for 4-D parameters, buffers and inputs")
          .add(&T::cudnn_benchmark, "cudnn_benchmark", "let cuDNN time convolution algorithms and keep the fastest")
          .add(&T::stop_on_nonfinite_loss, "stop_on_nonfinite_loss",
               "stop (exit 1) when an applied step's loss is inf or NaN");
  return options;
}

// `none`, `all` or a list of names: a scalar and a list under one key, which Option<T> cannot
// read, so it is read here and documented by hand.
const OptionDoc kActivationCheckpointing{
    "activation_checkpointing", "none",
    "recompute in the backward pass instead of keeping activations: none, all (every block the model routes) or a "
    "list of submodule names"};

ActivationCheckpointing read_activation_checkpointing(const Config& s) {
  const std::string& key = kActivationCheckpointing.name;
  std::optional<std::string> word;
  try {
    word = s.string(key, kActivationCheckpointing.default_value);
  } catch (const Error&) {  // not a scalar: a list of names (or a mistake strings() reports)
  }
  if (!word) {
    ActivationCheckpointing listed{false, s.strings(key, {})};
    for (const std::string& name : listed.names) {
      if (name.empty()) s.fail(key, "an empty submodule name", "name the model's submodules as precision.fp32_modules does");
    }
    return listed;
  }
  if (*word == "none") return {};
  if (*word == "all") return {true, {}};
  s.fail(key, "expected none, all or a list of submodule names, got '" + *word + "'",
         "write [" + *word + "] to recompute the submodule of that name");
}

}  // namespace

TrainerOptions TrainerOptions::read(const Config& s) {
  TrainerOptions o = bound().read(s);
  o.activation_checkpointing = read_activation_checkpointing(s);
  o.distributed = distributed::DistributedOptions::read(s.section("distributed"));
  return o;
}

std::vector<OptionDoc> trainer_option_docs() {
  std::vector<OptionDoc> docs = bound().docs();
  docs.push_back(kActivationCheckpointing);
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
