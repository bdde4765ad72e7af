// mixt::DataLoader: order against torch.utils.data.DistributedSampler (golden values in
// tests/golden/distributed_sampler.json, made by tests/golden/make_sampler_golden.py),
// results independent of the worker count, drop_last, bad samples, bounded prefetch.
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mixt/helpers/data_loader.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "configured_paths.h"
#include "expect_error.h"

using ::testing::HasSubstr;

namespace mixt {
namespace {

// Sample i: a 2 x 3 x 3 image filled with i plus a random draw (so the augmentation RNG
// shows in the data), labelled i. Indices in `bad` throw BadSample.
class CountingSource : public SampleSource {
 public:
  explicit CountingSource(std::int64_t n, std::set<std::int64_t> bad = {}) : n_(n), bad_(std::move(bad)) {}
  std::int64_t size() const override { return n_; }
  std::string sample_name(std::int64_t i) const override { return "sample-" + std::to_string(i) + ".jpg"; }
  Sample load(std::int64_t i, SampleRng& rng) const override {
    ++loads;
    if (bad_.contains(i)) throw BadSample("cannot decode");
    return {at::full({2, 3, 3}, static_cast<double>(i) + rng.uniform(), at::kFloat), i};
  }
  mutable std::atomic<int> loads{0};

 private:
  std::int64_t n_;
  std::set<std::int64_t> bad_;
};

LoaderOptions options(std::int64_t batch, std::int64_t workers, std::uint64_t seed = 3) {
  LoaderOptions o;
  o.batch_size = batch;
  o.workers = workers;
  o.seed = seed;
  return o;
}

// What is left of the current epoch.
std::vector<Batch> epoch_rest(DataLoader& loader) {
  std::vector<Batch> batches;
  while (auto b = loader.next_batch()) batches.push_back(*b);
  return batches;
}

std::vector<Batch> epoch(DataLoader& loader, std::int64_t e) {
  loader.start_epoch(e);
  return epoch_rest(loader);
}

std::vector<std::int64_t> targets(const std::vector<Batch>& batches) {
  std::vector<std::int64_t> all;
  for (const auto& b : batches) {
    for (std::int64_t i = 0; i < b.targets.size(0); ++i) all.push_back(b.targets[i].item<std::int64_t>());
  }
  return all;
}

bool same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i].inputs, b[i].inputs) || !at::equal(a[i].targets, b[i].targets)) return false;
  }
  return true;
}

TEST(DataLoader, OrderIsDistributedSamplers) {
  std::ifstream in(testing::configured::source_dir() + "/tests/golden/distributed_sampler.json");
  const auto golden = nlohmann::json::parse(in);
  for (const auto& c : golden["cases"]) {
    const std::int64_t n = c["n"], world = c["world_size"];
    for (std::int64_t rank = 0; rank < world; ++rank) {
      LoaderOptions o = options(4, 2, c["seed"].get<std::uint64_t>());
      o.shuffle = c["shuffle"];
      o.rank = rank;
      o.world_size = world;
      DataLoader loader(std::make_shared<CountingSource>(n), o);
      const auto expected = c["ranks"][static_cast<std::size_t>(rank)].get<std::vector<std::int64_t>>();
      EXPECT_EQ(loader.size(), static_cast<std::int64_t>(expected.size()));
      EXPECT_EQ(targets(epoch(loader, c["epoch"])), expected) << "n=" << n << " world=" << world << " rank=" << rank;
    }
  }
}

TEST(DataLoader, ShardsCoverTheDatasetExactlyOncePerEpoch) {
  const std::int64_t n = 120, world = 4;
  std::multiset<std::int64_t> seen;
  for (std::int64_t rank = 0; rank < world; ++rank) {
    LoaderOptions o = options(7, 2);
    o.rank = rank;
    o.world_size = world;
    DataLoader loader(std::make_shared<CountingSource>(n), o);
    for (auto t : targets(epoch(loader, 5))) seen.insert(t);
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
}

TEST(DataLoader, SameBatchesWhateverTheWorkerCount) {
  auto source = std::make_shared<CountingSource>(57);
  DataLoader inline_loader(source, options(5, 0));
  const auto reference = epoch(inline_loader, 2);
  ASSERT_EQ(reference.size(), 12u);
  for (std::int64_t workers : {1, 2, 3, 8}) {
    for (std::int64_t prefetch : {0, 1, 5}) {
      LoaderOptions o = options(5, workers);
      o.prefetch = prefetch;
      DataLoader loader(source, o);
      EXPECT_TRUE(same(epoch(loader, 2), reference)) << workers << " workers, prefetch " << prefetch;
    }
  }
  // The augmentation depends on the epoch and the seed.
  EXPECT_FALSE(same(epoch(inline_loader, 3), reference));
  DataLoader other_seed(source, options(5, 2, 4));
  EXPECT_FALSE(same(epoch(other_seed, 2), reference));
}

TEST(DataLoader, DropLastDropsOnlyTheIncompleteBatch) {
  auto source = std::make_shared<CountingSource>(10);
  LoaderOptions o = options(4, 2);
  DataLoader keep(source, o);
  o.drop_last = true;
  DataLoader drop(source, o);
  EXPECT_EQ(keep.batches_per_epoch(), 3);
  EXPECT_EQ(drop.batches_per_epoch(), 2);
  const auto kept = epoch(keep, 0);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[2].inputs.size(0), 2);
  EXPECT_EQ(epoch(drop, 0).size(), 2u);
  EXPECT_EQ(kept[0].inputs.sizes(), (std::vector<std::int64_t>{4, 2, 3, 3}));
}

TEST(DataLoader, StartingAnEpochAgainMidwayStartsItCleanly) {
  DataLoader loader(std::make_shared<CountingSource>(40), options(3, 3));
  const auto full = epoch(loader, 1);
  loader.start_epoch(1);
  loader.next_batch();
  loader.next_batch();
  EXPECT_TRUE(same(epoch(loader, 1), full));
}

// Resuming mid-epoch: starting at batch k gives the batches k, k+1, ... of the full epoch
// and loads only their samples (the count is what makes this test fail if the skipped
// batches were built and thrown away).
TEST(DataLoader, StartingAtABatchDeliversTheRestOfTheEpochAndLoadsOnlyThat) {
  for (const std::int64_t workers : {0, 3}) {
    auto source = std::make_shared<CountingSource>(40);
    DataLoader loader(source, options(3, workers));
    const auto full = epoch(loader, 2);  // 14 batches: 13 of 3 and one of 1
    ASSERT_EQ(full.size(), 14u);
    const int loads_before = source->loads;
    loader.start_epoch(2, 10);
    EXPECT_EQ(loader.position(), 10);
    std::vector<Batch> rest;
    while (auto b = loader.next_batch()) rest.push_back(*b);
    EXPECT_TRUE(same(rest, std::vector<Batch>(full.begin() + 10, full.end()))) << "workers " << workers;
    EXPECT_EQ(source->loads - loads_before, 3 * 3 + 1) << "workers " << workers;
    EXPECT_EQ(loader.position(), 14);
  }
}

// position() counts a batch next_batch() passed over because every sample of it was bad,
// so start_epoch(e, position()) continues where the consumer really was.
TEST(DataLoader, PositionCountsBatchesOfOnlyBadSamples) {
  LoaderOptions o = options(2, 2);
  o.shuffle = false;
  o.warn = [](const std::string&) {};
  DataLoader loader(std::make_shared<CountingSource>(8, std::set<std::int64_t>{2, 3}), o);
  loader.start_epoch(0);
  EXPECT_EQ(loader.position(), 0);
  loader.next_batch();  // samples 0, 1
  const auto second = loader.next_batch();  // samples 4, 5: the batch of 2, 3 was all bad
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(targets({*second}), (std::vector<std::int64_t>{4, 5}));
  EXPECT_EQ(loader.position(), 3);
  loader.start_epoch(0, loader.position());
  EXPECT_EQ(targets(epoch_rest(loader)), (std::vector<std::int64_t>{6, 7}));
}

TEST(DataLoader, StartingPastTheEndIsAnError) {
  DataLoader loader(std::make_shared<CountingSource>(10), options(4, 0));
  EXPECT_THROW(loader.start_epoch(0, 4), Error);
  loader.start_epoch(0, 3);  // the end itself: an empty rest
  EXPECT_FALSE(loader.next_batch().has_value());
}

TEST(DataLoader, BadSamplesAreSkippedCountedAndNamedOnce) {
  std::vector<std::string> warnings;
  LoaderOptions o = options(4, 2);
  o.shuffle = false;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  DataLoader loader(std::make_shared<CountingSource>(12, std::set<std::int64_t>{1, 2, 3, 9}), o);
  const auto first = epoch(loader, 0);
  epoch(loader, 1);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(targets(first), (std::vector<std::int64_t>{0, 4, 5, 6, 7, 8, 10, 11}));
  EXPECT_EQ(first[0].inputs.size(0), 1);
  EXPECT_EQ(loader.bad_samples(), 8);  // 4 per epoch
  ASSERT_EQ(warnings.size(), 4u);      // once per file
  // Workers build batches concurrently, so the warnings may come in any order.
  std::vector<std::string> named;
  for (const auto& w : warnings) {
    for (const char* file : {"sample-1.jpg", "sample-2.jpg", "sample-3.jpg", "sample-9.jpg"}) {
      if (w.find(std::string(file) + ": cannot decode") != std::string::npos) named.push_back(file);
    }
  }
  std::sort(named.begin(), named.end());
  EXPECT_EQ(named, (std::vector<std::string>{"sample-1.jpg", "sample-2.jpg", "sample-3.jpg", "sample-9.jpg"}))
      << warnings[0];
}

TEST(DataLoader, ABatchOfOnlyBadSamplesIsSkipped) {
  LoaderOptions o = options(2, 1);
  o.shuffle = false;
  o.warn = [](const std::string&) {};
  DataLoader loader(std::make_shared<CountingSource>(6, std::set<std::int64_t>{2, 3}), o);
  EXPECT_EQ(targets(epoch(loader, 0)), (std::vector<std::int64_t>{0, 1, 4, 5}));
}

// With several ranks a batch of only bad samples cannot be skipped (the rank would fall a
// step behind the others): it is an error naming the batch, the epoch and the rank.
TEST(DataLoader, ABatchOfOnlyBadSamplesOnOneOfSeveralRanksIsAnError) {
  LoaderOptions o = options(2, 1);
  o.shuffle = false;
  o.world_size = 2;
  o.rank = 1;  // indices 1, 3, 5, 7: its second batch is 5, 7
  o.warn = [](const std::string&) {};
  DataLoader loader(std::make_shared<CountingSource>(8, std::set<std::int64_t>{5, 7}), o);
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next_batch().has_value());
  try {
    loader.next_batch();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("every sample of batch 2 of epoch 1 on rank 1 of 2 is bad", 0), 0u)
        << e.what();
  }
}

TEST(DataLoader, OnBadSampleFailStopsNamingTheSample) {
  LoaderOptions o = options(4, 2);
  o.shuffle = false;
  o.on_bad_sample = OnBadSample::fail;
  DataLoader loader(std::make_shared<CountingSource>(12, std::set<std::int64_t>{6}), o);
  loader.start_epoch(0);
  loader.next_batch();
  const Error e = testing::thrown_error([&] {
    loader.next_batch();
  });
  EXPECT_EQ(e.exit_code(), 1);
  EXPECT_THAT(e.what(), HasSubstr("bad sample sample-6.jpg: cannot decode"));
}

// Records how many threads ATen would use inside load().
class ThreadCountSource : public SampleSource {
 public:
  std::int64_t size() const override { return 8; }
  std::string sample_name(std::int64_t i) const override { return std::to_string(i); }
  Sample load(std::int64_t i, SampleRng&) const override {
    threads = at::get_num_threads();
    return {at::zeros({1}), i};
  }
  mutable std::atomic<int> threads{-1};
};

TEST(DataLoader, WorkersRunAtenSingleThreadedAndLeaveTheTrainerAlone) {
  const int before = at::get_num_threads();
  auto source = std::make_shared<ThreadCountSource>();
  DataLoader loader(source, options(4, 2));
  epoch(loader, 0);
  EXPECT_EQ(source->threads.load(), 1);
  EXPECT_EQ(at::get_num_threads(), before);
}

TEST(DataLoader, BatchMemoryIsReusedOnlyAfterTrainingLetsGo) {
  auto source = std::make_shared<CountingSource>(200);
  DataLoader loader(source, options(4, 2));
  {
    // Holding every batch: no two share memory, and each still holds its own samples.
    const auto held = epoch(loader, 0);
    std::set<void*> memory;
    for (const auto& b : held) memory.insert(b.inputs.data_ptr());
    EXPECT_EQ(memory.size(), held.size());
    for (const auto& b : held) {
      EXPECT_TRUE(at::equal(b.inputs.select(1, 0).select(1, 0).select(1, 0).floor().to(at::kLong), b.targets));
    }
  }
  // Dropping each batch before asking for the next: a few buffers go round.
  loader.start_epoch(1);
  std::set<void*> recycled;
  std::int64_t batches = 0;
  while (auto b = loader.next_batch()) {
    recycled.insert(b->inputs.data_ptr());
    ++batches;
  }
  EXPECT_EQ(batches, 50);
  EXPECT_LE(recycled.size(), 10u);
}

// Waits (up to 10 s: the machine may be busy) until `loads` reaches `count`, then a little
// longer to see that it goes no further.
int settled_loads(const CountingSource& source, int count) {
  for (int i = 0; i < 1000 && source.loads.load() < count; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return source.loads.load();
}

TEST(DataLoader, PrefetchIsBounded) {
  auto source = std::make_shared<CountingSource>(1000);
  LoaderOptions o = options(10, 3);
  o.prefetch = 2;
  DataLoader loader(source, o);
  loader.start_epoch(0);
  EXPECT_EQ(settled_loads(*source, 20), 20);  // two batches ahead, no more
  loader.next_batch();
  EXPECT_EQ(settled_loads(*source, 30), 30);
}

// Since ABI 6.5: a source whose targets are tensors (a mask per image). Sample i's target is
// a 3 x 3 int64 mask filled with i plus its augmentation draw, so a target that left its
// input shows; index `odd_shape` gives a 2 x 2 mask, index `bad` throws BadSample.
class MaskSource : public TensorSampleSource {
 public:
  explicit MaskSource(std::int64_t n, std::int64_t bad = -1, std::int64_t odd_shape = -1)
      : n_(n), bad_(bad), odd_shape_(odd_shape) {}
  std::int64_t size() const override { return n_; }
  std::string sample_name(std::int64_t i) const override { return "mask-" + std::to_string(i) + ".png"; }
  TensorSample load_tensor_sample(std::int64_t i, SampleRng& rng) const override {
    if (i == bad_) throw BadSample("cannot decode the mask");
    const std::int64_t draw = rng.integer(0, 1000);
    const std::int64_t side = i == odd_shape_ ? 2 : 3;
    return {at::full({2, 3, 3}, static_cast<double>(i * 1000 + draw), at::kFloat),
            at::full({side, side}, i * 1000 + draw, at::kLong)};
  }

 private:
  std::int64_t n_, bad_, odd_shape_;
};

TEST(DataLoader, TensorTargetsAreStackedBesideTheirInputsWhateverTheWorkerCount) {
  auto source = std::make_shared<MaskSource>(10, /*bad=*/4);
  DataLoader serial(source, options(4, 0)), threaded(source, options(4, 3));
  const std::vector<Batch> batches = epoch(serial, 1);
  ASSERT_EQ(batches.size(), 3u);
  std::int64_t samples = 0;
  for (const Batch& b : batches) {
    EXPECT_EQ(b.targets.sizes(), (std::vector<std::int64_t>{b.inputs.size(0), 3, 3}));
    EXPECT_EQ(b.targets.scalar_type(), at::kLong);
    samples += b.targets.size(0);
    // Each mask is its own input's value: targets stay with their samples, bad one or not.
    EXPECT_TRUE(at::equal(b.targets.to(at::kFloat), b.inputs.select(1, 0)));
  }
  EXPECT_EQ(samples, 9);
  EXPECT_EQ(serial.bad_samples(), 1);
  EXPECT_TRUE(same(batches, epoch(threaded, 1)));
}

TEST(DataLoader, ATensorTargetOfAnotherShapeStopsTheEpochNamingTheSample) {
  LoaderOptions o = options(10, 0);
  o.shuffle = false;
  DataLoader loader(std::make_shared<MaskSource>(10, -1, /*odd_shape=*/6), o);
  testing::expect_error([&] { epoch(loader, 0); }, ErrorKind::runtime,
                        "sample mask-6.png has a target of shape [2, 2] but the batch's first has [3, 3]");
}

TEST(DataLoader, LoadOfATensorSampleSourceIsNotCalledAndSaysSo) {
  const MaskSource source(3);
  SampleRng rng = SampleRng::for_sample(0, 0, 0);
  EXPECT_THROW(static_cast<const SampleSource&>(source).load(1, rng), std::logic_error);
}

}  // namespace
}  // namespace mixt
