#include "distributed/options.h"

#include <optional>
#include <string>

#include "mixt/options.h"

namespace mixt::distributed {

namespace {
constexpr int kMaxTimeoutSeconds = 7 * 24 * 3600;
constexpr int kMaxBucketMb = 65536;

// Upper bounds: both become int64 (milliseconds, bytes), where 1e300 would overflow into
// a negative timeout.
Check<double> up_to(double most, std::string message) {
  return [most, message](const double& value) -> std::optional<std::string> {
    if (value > 0 && value <= most) return std::nullopt;
    return message;
  };
}

using O = DistributedOptions;

// Each key of `trainer.distributed:` once: its default is the field's initialiser (options.h).
const OptionsOf<DistributedOptions>& bound() {
  static const auto options =
      OptionsOf<O>()
          // The backend's own message names it ("unknown backend 'mpi'"): checked in read().
          .add(&O::backend, "backend", "`auto` (NCCL when the rank's device is CUDA, else Gloo), `nccl`, `gloo`")
          .add(&O::timeout_seconds, "timeout", "seconds a collective or the store may wait before the rank fails",
               up_to(kMaxTimeoutSeconds,
                     "must be a number of seconds in (0, " + std::to_string(kMaxTimeoutSeconds) + "] (a week)"))
          .add(&O::bucket_mb, "bucket_mb", "gradient all-reduce bucket size in MiB (as DDP's `bucket_cap_mb`)",
               up_to(kMaxBucketMb, "must be a number of MiB in (0, " + std::to_string(kMaxBucketMb) + "]"))
          .add(&O::overlap, "overlap",
               "`true`: start each bucket's all-reduce from gradient hooks during backward, as DDP does (see "
               "below); `false`: after the policy's `backward()` returns")
          .add(&O::sync_batchnorm, "sync_batchnorm",
               "`true`: the model's `mixt::BatchNorm1d/2d/3d` layers normalise with the statistics of the global "
               "batch, as `torch.nn.SyncBatchNorm` (see below)")
          .choice(&O::sharding, "sharding",
                  {{"none", Sharding::none},
                   {"optimizer", Sharding::optimizer},
                   {"gradients", Sharding::gradients},
                   {"parameters", Sharding::parameters}},
                  "`none`: every rank keeps the whole optimizer state; `optimizer` (ZeRO-1): each rank keeps and "
                  "updates 1/N of it, gradients all-reduced; `gradients` (ZeRO-2): gradients reduce-scattered too, "
                  "each rank keeping its 1/N; `parameters` (ZeRO-3): the weights of each block too, gathered "
                  "around its forward and backward (see below)")
          .add(&O::prefetch, "prefetch",
               "with `sharding: parameters`: `true`: start gathering the next block's weights while a block "
               "computes (two blocks whole at once), as FSDP2 prefetches; `false`: one block at a time");
  return options;
}
}  // namespace

const char* sharding_name(Sharding mode) {
  switch (mode) {
    case Sharding::none:
      return "none";
    case Sharding::optimizer:
      return "optimizer";
    case Sharding::gradients:
      return "gradients";
    case Sharding::parameters:
      return "parameters";
  }
  return "?";
}

DistributedOptions DistributedOptions::read(const Config& s) {
  DistributedOptions o = bound().read(s);
  if (o.backend != "auto" && o.backend != "nccl" && o.backend != "gloo") {
    s.fail("backend", "unknown backend '" + o.backend + "'", "use auto, nccl or gloo");
  }
  return o;
}

std::vector<OptionDoc> DistributedOptions::docs() { return bound().docs(); }

}  // namespace mixt::distributed
