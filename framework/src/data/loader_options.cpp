// The loader's recipe options, shared by every dataset plugin built on DataLoader.
#include <thread>

#include "mixt/helpers/data_loader.h"

namespace mixt {

LoaderOptions read_loader_options(const Config& c, const DatasetContext& context, bool shuffle_default,
                                  std::int64_t batch_size_default) {
  LoaderOptions o;
  o.batch_size = c.integer("batch_size", batch_size_default);
  o.shuffle = c.boolean("shuffle", shuffle_default);
  o.drop_last = c.boolean("drop_last", false);
  o.workers = c.integer("workers", std::min<std::int64_t>(4, std::thread::hardware_concurrency()));
  o.prefetch = c.integer("prefetch", 0);
  const std::string on_bad = c.string("on_bad_sample", "skip");
  if (o.batch_size < 1) c.fail("batch_size", "must be at least 1");
  if (o.workers < 0) c.fail("workers", "must be 0 (load in the training thread) or more");
  if (o.prefetch < 0) c.fail("prefetch", "must be 0 (2 per worker) or more");
  if (on_bad == "skip") {
    o.on_bad_sample = OnBadSample::skip;
  } else if (on_bad == "fail") {
    o.on_bad_sample = OnBadSample::fail;
  } else {
    c.fail("on_bad_sample", "expected skip or fail, got \"" + on_bad + "\"");
  }
  o.seed = context.seed;
  o.rank = context.rank;
  o.world_size = context.world_size;
  o.device = context.device;
  return o;
}

std::vector<OptionDoc> loader_option_docs() {
  return {
      {"batch_size", "64", "samples per batch"},
      {"shuffle", "train: true", "reshuffle every epoch (DistributedSampler order from seed + epoch)"},
      {"drop_last", "false", "drop the last incomplete batch"},
      {"workers", "min(4,cores)", "loader threads (0: load in the training thread)"},
      {"prefetch", "0", "batches prepared ahead of training (0: 2 per worker)"},
      {"on_bad_sample", "skip", "skip (count and warn once per file) or fail (stop, naming the file)"},
  };
}

}  // namespace mixt
