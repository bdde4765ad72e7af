// The loader's recipe options, shared by every dataset plugin built on DataLoader.
#include <algorithm>
#include <thread>

#include "mixt/helpers/data_loader.h"
#include "mixt/options.h"

namespace mixt {

std::int64_t default_loader_workers() {
  return std::min<std::int64_t>(4, std::thread::hardware_concurrency());
}

OptionsOf<LoaderKeys> loader_keys(std::int64_t batch_size_default) {
  LoaderKeys defaults;
  defaults.batch_size = batch_size_default;
  return OptionsOf<LoaderKeys>(defaults)
      .add(&LoaderKeys::batch_size, "batch_size", "samples per batch", at_least(1))
      .contextual(&LoaderKeys::shuffle, "shuffle", "true for train",
                  "reshuffle every epoch (DistributedSampler order from seed + epoch)")
      .add(&LoaderKeys::drop_last, "drop_last", "drop the last incomplete batch")
      .contextual(&LoaderKeys::workers, "workers", "min(4, cores)", "loader threads (0: load in the training thread)",
                  at_least(0))
      .add(&LoaderKeys::prefetch, "prefetch", "batches prepared ahead of training (0: 2 per worker)", at_least(0))
      .choice(&LoaderKeys::on_bad_sample, "on_bad_sample", {{"skip", OnBadSample::skip}, {"fail", OnBadSample::fail}},
              "skip: count and warn once per file; fail: stop, naming the file");
}

LoaderOptions LoaderKeys::for_context(const DatasetContext& context, bool shuffle_default) const {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle.value_or(shuffle_default);
  o.drop_last = drop_last;
  o.workers = workers.value_or(default_loader_workers());
  o.prefetch = prefetch;
  o.on_bad_sample = on_bad_sample;
  o.seed = context.seed;
  o.rank = context.rank;
  o.world_size = context.world_size;
  o.device = context.device;
  return o;
}

}  // namespace mixt
