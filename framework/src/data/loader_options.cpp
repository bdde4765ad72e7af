// The loader's recipe options, shared by every dataset plugin built on DataLoader.
#include <algorithm>
#include <thread>

#include "mixt/helpers/data_loader.h"
#include "mixt/options.h"

namespace mixt {

std::int64_t default_loader_workers() {
  return std::min<std::int64_t>(4, std::thread::hardware_concurrency());
}

namespace {
// The defaults are LoaderOptions' initialisers, written once (a dataset may pass its own batch size).
const LoaderOptions kDefaults;
const Option<std::int64_t> kBatchSize{"batch_size", kDefaultBatchSize, "samples per batch", at_least(1)};
const Contextual<bool> kShuffle{"shuffle", "true for train",
                                "reshuffle every epoch (DistributedSampler order from seed + epoch)"};
const Option<bool> kDropLast{"drop_last", kDefaults.drop_last, "drop the last incomplete batch"};
const Contextual<std::int64_t> kWorkers{"workers", "min(4, cores)", "loader threads (0: load in the training thread)",
                                        at_least(0)};
const Option<std::int64_t> kPrefetch{"prefetch", kDefaults.prefetch, "batches prepared ahead of training (0: 2 per worker)",
                                     at_least(0)};
const Option<std::string> kOnBadSample{"on_bad_sample", "skip",
                                       "skip: count and warn once per file; fail: stop, naming the file",
                                       one_of({"skip", "fail"})};
}  // namespace

LoaderOptions read_loader_options(const Config& c, const DatasetContext& context, bool shuffle_default,
                                  std::int64_t batch_size_default) {
  LoaderOptions o;
  o.batch_size = kBatchSize.with_fallback(batch_size_default).read(c);
  o.shuffle = kShuffle.read(c, shuffle_default);
  o.drop_last = kDropLast.read(c);
  o.workers = kWorkers.read(c, kDefaults.workers);
  o.prefetch = kPrefetch.read(c);
  o.on_bad_sample = kOnBadSample.read(c) == "skip" ? OnBadSample::skip : OnBadSample::fail;
  o.seed = context.seed;
  o.rank = context.rank;
  o.world_size = context.world_size;
  o.device = context.device;
  return o;
}

std::vector<OptionDoc> loader_option_docs(std::int64_t batch_size_default) {
  return {kBatchSize.with_fallback(batch_size_default), kShuffle, kDropLast, kWorkers, kPrefetch, kOnBadSample};
}

}  // namespace mixt
