#include "train/trainer_options.h"

#include <optional>

#include "mixt/options.h"

namespace mixt {

namespace {
// Each option's default is the struct's own initialiser.
struct Declarations {
  const TrainerOptions d;
  const Option<std::int64_t> epochs{"epochs", d.epochs, "epochs to train (the total, also when resuming)",
                                    at_least(1)};
  const Option<std::string> device{"device", d.device,
                                   "auto (CUDA when usable, else CPU), cpu, cuda (= cuda:0) or cuda:N"};
  const Option<std::int64_t> seed{"seed", static_cast<std::int64_t>(d.seed),
                                  "seeds model initialisation and the data order"};
  // A million threads made even `mixt check` hang (ATen starts them at once).
  const Option<std::int64_t> threads{"threads", d.threads, "intra-op threads (0 = LibTorch's default)",
                                     between(0, 1024)};
  const Option<std::int64_t> log_every{"log_every", d.log_every, "optimizer steps between metric lines",
                                       at_least(1)};
  const Option<std::int64_t> accumulate{"accumulate", d.accumulate, "micro-batches per optimizer step",
                                        at_least(1)};
  const Option<double> clip_grad_norm{"clip_grad_norm", d.clip_grad_norm,
                                      "clip the global gradient norm to this (0 = off), after unscaling",
                                      at_least(0)};
  const Option<std::int64_t> max_steps_per_epoch{
      "max_steps_per_epoch", d.max_steps_per_epoch,
      "stop an epoch after this many optimizer steps (0 = whole dataset)", at_least(0)};
  const Option<std::int64_t> keep_checkpoints{"keep_checkpoints", d.keep_checkpoints,
                                              "per-epoch checkpoints kept (last always points at the newest)",
                                              at_least(1)};
  const Option<std::string> resume{"resume", d.resume,
                                   "checkpoint file, run directory or its checkpoints/ to continue from"};
  const Option<double> label_smoothing{"label_smoothing", d.label_smoothing,
                                       "cross-entropy label smoothing in [0, 1)", at_least(0) && below(1)};
  const Option<bool> channels_last{"channels_last", d.channels_last,
                                   "NHWC memory format for 4-D parameters, buffers and inputs"};
  const Option<bool> cudnn_benchmark{"cudnn_benchmark", d.cudnn_benchmark,
                                     "let cuDNN time convolution algorithms and keep the fastest"};
  const Option<bool> stop_on_nonfinite_loss{"stop_on_nonfinite_loss", d.stop_on_nonfinite_loss,
                                            "stop (exit 1) when an applied step's loss is inf or NaN"};
};

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

const Declarations& declarations() {
  static const Declarations declared;
  return declared;
}
}  // namespace

TrainerOptions TrainerOptions::read(const Config& s) {
  const Declarations& k = declarations();
  TrainerOptions o;
  o.epochs = k.epochs.read(s);
  o.device = k.device.read(s);
  o.seed = static_cast<std::uint64_t>(k.seed.read(s));
  o.threads = k.threads.read(s);
  o.log_every = k.log_every.read(s);
  o.accumulate = k.accumulate.read(s);
  o.clip_grad_norm = k.clip_grad_norm.read(s);
  o.max_steps_per_epoch = k.max_steps_per_epoch.read(s);
  o.keep_checkpoints = k.keep_checkpoints.read(s);
  o.resume = k.resume.read(s);
  o.label_smoothing = k.label_smoothing.read(s);
  o.channels_last = k.channels_last.read(s);
  o.cudnn_benchmark = k.cudnn_benchmark.read(s);
  o.stop_on_nonfinite_loss = k.stop_on_nonfinite_loss.read(s);
  o.activation_checkpointing = read_activation_checkpointing(s);
  o.distributed = distributed::DistributedOptions::read(s.section("distributed"));
  return o;
}

std::vector<OptionDoc> trainer_option_docs() {
  const Declarations& k = declarations();
  std::vector<OptionDoc> docs = {k.epochs,
                                 k.device,
                                 k.seed,
                                 k.threads,
                                 k.log_every,
                                 k.accumulate,
                                 k.clip_grad_norm,
                                 k.max_steps_per_epoch,
                                 k.keep_checkpoints,
                                 k.resume,
                                 k.label_smoothing,
                                 k.channels_last,
                                 k.cudnn_benchmark,
                                 k.stop_on_nonfinite_loss,
                                 kActivationCheckpointing};
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
