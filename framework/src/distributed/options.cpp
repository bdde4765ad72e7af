#include "distributed/options.h"

#include <string>

namespace mixt::distributed {

namespace {
constexpr int kMaxTimeoutSeconds = 7 * 24 * 3600;
constexpr int kMaxBucketMb = 65536;
}  // namespace

DistributedOptions DistributedOptions::read(const Config& s) {
  DistributedOptions o;
  o.backend = s.string("backend", o.backend);
  o.timeout_seconds = s.number("timeout", o.timeout_seconds);
  o.bucket_mb = s.number("bucket_mb", o.bucket_mb);
  o.overlap = s.boolean("overlap", o.overlap);
  o.sync_batchnorm = s.boolean("sync_batchnorm", o.sync_batchnorm);
  if (o.backend != "auto" && o.backend != "nccl" && o.backend != "gloo") {
    s.fail("backend", "unknown backend '" + o.backend + "'", "use auto, nccl or gloo");
  }
  // Upper bounds: both become int64 (milliseconds, bytes); 1e300 overflowed into a
  // negative timeout.
  if (!(o.timeout_seconds > 0 && o.timeout_seconds <= kMaxTimeoutSeconds)) {
    s.fail("timeout", "must be a number of seconds in (0, " + std::to_string(kMaxTimeoutSeconds) + "] (a week)");
  }
  if (!(o.bucket_mb > 0 && o.bucket_mb <= kMaxBucketMb)) {
    s.fail("bucket_mb", "must be a number of MiB in (0, " + std::to_string(kMaxBucketMb) + "]");
  }
  return o;
}

}  // namespace mixt::distributed
