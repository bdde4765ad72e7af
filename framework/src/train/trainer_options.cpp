#include "train/trainer_options.h"

#include <optional>

namespace mixt {

TrainerOptions TrainerOptions::read(const Config& s) {
  TrainerOptions o;
  o.epochs = s.integer("epochs", o.epochs);
  o.device = s.string("device", o.device);
  o.seed = static_cast<std::uint64_t>(s.integer("seed", static_cast<std::int64_t>(o.seed)));
  o.threads = s.integer("threads", o.threads);
  o.log_every = s.integer("log_every", o.log_every);
  o.accumulate = s.integer("accumulate", o.accumulate);
  o.clip_grad_norm = s.number("clip_grad_norm", o.clip_grad_norm);
  o.max_steps_per_epoch = s.integer("max_steps_per_epoch", o.max_steps_per_epoch);
  o.keep_checkpoints = s.integer("keep_checkpoints", o.keep_checkpoints);
  o.resume = s.string("resume", o.resume);
  o.label_smoothing = s.number("label_smoothing", o.label_smoothing);
  o.channels_last = s.boolean("channels_last", o.channels_last);
  o.cudnn_benchmark = s.boolean("cudnn_benchmark", o.cudnn_benchmark);
  o.stop_on_nonfinite_loss = s.boolean("stop_on_nonfinite_loss", o.stop_on_nonfinite_loss);
  if (o.label_smoothing < 0 || o.label_smoothing >= 1) s.fail("label_smoothing", "must be in [0, 1)");
  o.distributed = distributed::DistributedOptions::read(s.section("distributed"));
  if (o.epochs < 1) s.fail("epochs", "must be at least 1");
  // A million threads made even `mixt check` hang (ATen starts them at once).
  if (o.threads < 0 || o.threads > 1024) s.fail("threads", "must be in [0, 1024] (0: LibTorch's default)");
  if (o.log_every < 1) s.fail("log_every", "must be at least 1");
  if (o.accumulate < 1) s.fail("accumulate", "must be at least 1");
  if (o.clip_grad_norm < 0) s.fail("clip_grad_norm", "must be 0 (off) or positive");
  if (o.max_steps_per_epoch < 0) s.fail("max_steps_per_epoch", "must be 0 (all) or positive");
  if (o.keep_checkpoints < 1) s.fail("keep_checkpoints", "must be at least 1");
  return o;
}

std::vector<OptionDoc> trainer_option_docs() {
  // The defaults shown are the structs' own initialisers, written as YAML.
  const TrainerOptions d;
  const auto number = [](double value) { return c10::str(value); };
  const auto flag = [](bool value) { return std::string(value ? "true" : "false"); };
  return {
      {"epochs", number(d.epochs), "epochs to train (the total, also when resuming)"},
      {"device", d.device, "auto (CUDA when usable, else CPU), cpu, cuda (= cuda:0) or cuda:N"},
      {"seed", number(d.seed), "seeds model initialisation and the data order"},
      {"threads", number(d.threads), "intra-op threads (0 = LibTorch's default)"},
      {"log_every", number(d.log_every), "optimizer steps between metric lines"},
      {"accumulate", number(d.accumulate), "micro-batches per optimizer step"},
      {"clip_grad_norm", number(d.clip_grad_norm), "clip the global gradient norm to this (0 = off), after unscaling"},
      {"max_steps_per_epoch", number(d.max_steps_per_epoch),
       "stop an epoch after this many optimizer steps (0 = whole dataset)"},
      {"keep_checkpoints", number(d.keep_checkpoints), "per-epoch checkpoints kept (last always points at the newest)"},
      {"resume", "\"" + d.resume + "\"", "checkpoint file, run directory or its checkpoints/ to continue from"},
      {"label_smoothing", number(d.label_smoothing), "cross-entropy label smoothing in [0, 1)"},
      {"channels_last", flag(d.channels_last), "NHWC memory format for 4-D parameters, buffers and inputs"},
      {"cudnn_benchmark", flag(d.cudnn_benchmark), "let cuDNN time convolution algorithms and keep the fastest"},
      {"stop_on_nonfinite_loss", flag(d.stop_on_nonfinite_loss),
       "stop (exit 1) when an applied step's loss is inf or NaN"},
      {"distributed.backend", d.distributed.backend, "under torchrun: auto (NCCL on CUDA, Gloo on CPU), nccl or gloo"},
      {"distributed.timeout", number(d.distributed.timeout_seconds), "seconds a collective or the store may wait"},
      {"distributed.bucket_mb", number(d.distributed.bucket_mb), "gradient all-reduce bucket size in MiB"},
      {"distributed.overlap", flag(d.distributed.overlap), "all-reduce gradient buckets during backward (as DDP)"},
      {"distributed.sync_batchnorm", flag(d.distributed.sync_batchnorm),
       "global batch statistics in mixt::BatchNorm layers"},
  };
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
