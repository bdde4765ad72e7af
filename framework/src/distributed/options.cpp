#include "distributed/options.h"

#include <optional>
#include <string>

#include "mixt/options.h"

namespace mixt::distributed {

namespace {
constexpr int kMaxTimeoutSeconds = 7 * 24 * 3600;
constexpr int kMaxBucketMb = 65536;

// Upper bounds: both become int64 (milliseconds, bytes); 1e300 overflowed into a
// negative timeout.
Check<double> up_to(double most, std::string message) {
  return [most, message](const double& value) -> std::optional<std::string> {
    if (value > 0 && value <= most) return std::nullopt;
    return message;
  };
}

struct Declarations {
  const DistributedOptions d;
  // The backend's own message names it ("unknown backend 'mpi'"): checked in read().
  const Option<std::string> backend{"backend", d.backend,
                                    "under torchrun: auto (NCCL on CUDA, Gloo on CPU), nccl or gloo"};
  const Option<double> timeout{
      "timeout", d.timeout_seconds, "seconds a collective or the store may wait",
      up_to(kMaxTimeoutSeconds, "must be a number of seconds in (0, " + std::to_string(kMaxTimeoutSeconds) +
                                    "] (a week)")};
  const Option<double> bucket_mb{"bucket_mb", d.bucket_mb, "gradient all-reduce bucket size in MiB",
                                 up_to(kMaxBucketMb, "must be a number of MiB in (0, " + std::to_string(kMaxBucketMb) +
                                                         "]")};
  const Option<bool> overlap{"overlap", d.overlap, "all-reduce gradient buckets during backward (as DDP)"};
  const Option<bool> sync_batchnorm{"sync_batchnorm", d.sync_batchnorm,
                                    "global batch statistics in mixt::BatchNorm layers"};
};

const Declarations& declarations() {
  static const Declarations declared;
  return declared;
}
}  // namespace

DistributedOptions DistributedOptions::read(const Config& s) {
  const Declarations& k = declarations();
  DistributedOptions o;
  o.backend = k.backend.read(s);
  o.timeout_seconds = k.timeout.read(s);
  o.bucket_mb = k.bucket_mb.read(s);
  o.overlap = k.overlap.read(s);
  o.sync_batchnorm = k.sync_batchnorm.read(s);
  if (o.backend != "auto" && o.backend != "nccl" && o.backend != "gloo") {
    s.fail("backend", "unknown backend '" + o.backend + "'", "use auto, nccl or gloo");
  }
  return o;
}

std::vector<OptionDoc> DistributedOptions::docs() {
  const Declarations& k = declarations();
  return {k.backend, k.timeout, k.bucket_mb, k.overlap, k.sync_batchnorm};
}

}  // namespace mixt::distributed
