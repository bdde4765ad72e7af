#include "distributed/options.h"

namespace mixt::distributed {

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
  if (!(o.timeout_seconds > 0)) s.fail("timeout", "must be a positive number of seconds");
  if (!(o.bucket_mb > 0)) s.fail("bucket_mb", "must be a positive number of megabytes");
  return o;
}

}  // namespace mixt::distributed
