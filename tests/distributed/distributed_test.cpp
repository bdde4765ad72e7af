// The c10d layer on its own: torchrun's environment, and a real two-rank Gloo process
// group on loopback (tests/support/distributed_probe.cpp launched once per rank) whose
// all-reduce, broadcast and bucketed gradient average must be exact; two ranks training
// under fp8_delayed keep one amax history.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <chrono>
#include <cstdlib>

#include "child_process.h"
#include "distributed/environment.h"
#include "expect_error.h"
#include "mixt/error.h"
#include "test_support.h"

namespace mixt {
namespace {

using distributed::LaunchEnvironment;
using testing::ChildProcess;
using testing::rank_environment;

// Sets environment variables for one test and restores them after.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::vector<std::pair<std::string, std::string>>& values) {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                             "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE"}) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(LaunchEnvironment, AbsentMeansASingleProcess) {
  ScopedEnvironment env({});
  EXPECT_FALSE(LaunchEnvironment::from_process_environment());
}

TEST(LaunchEnvironment, ReadsWhatTorchrunSets) {
  ScopedEnvironment env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29400"},
                         {"TORCHELASTIC_RESTART_COUNT", "2"}, {"TORCHELASTIC_RUN_ID", "job-17"},
                         {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  const auto e = LaunchEnvironment::from_process_environment();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->master_addr, "10.0.0.7");
  EXPECT_EQ(e->master_port, 29400);
  EXPECT_EQ(e->restart_count, 2);
  EXPECT_EQ(e->run_id, "job-17");
  EXPECT_TRUE(e->use_agent_store);
}

TEST(LaunchEnvironment, AgentStoreOnlyForTheExactStringTrue) {
  ScopedEnvironment env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TORCHELASTIC_USE_AGENT_STORE", "1"}});
  EXPECT_FALSE(LaunchEnvironment::from_process_environment()->use_agent_store);
}

TEST(LaunchEnvironment, BadValuesAreUsageErrors) {
  {
    ScopedEnvironment env({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}});
    SCOPED_TRACE(::testing::Message() << "RANK >= WORLD_SIZE accepted");
    const Error e = testing::thrown_error([&] {
      LaunchEnvironment::from_process_environment();
    });
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_THAT(e.what(), HasSubstr("RANK='2'"));
  }
  {
    ScopedEnvironment env({{"RANK", "0"}, {"LOCAL_RANK", "0"}});
    EXPECT_THROW(LaunchEnvironment::from_process_environment(), Error);
  }
  {
    ScopedEnvironment env({{"RANK", "0"}, {"WORLD_SIZE", "2"}});  // no MASTER_ADDR
    EXPECT_THROW(LaunchEnvironment::from_process_environment(), Error);
  }
}

TEST(GlooProcessGroup, TwoRanksOnLoopbackAreExact) {
  TempDir dir;
  const int port = testing::free_port();
  ChildProcess rank0({testing::configured::distributed_probe(), "collectives"}, rank_environment(0, 2, port),
                     dir.path(), dir.path() / "0.log");
  ChildProcess rank1({testing::configured::distributed_probe(), "collectives"}, rank_environment(1, 2, port),
                     dir.path(), dir.path() / "1.log");
  const auto code0 = rank0.wait_for(60), code1 = rank1.wait_for(10);
  const std::string log0 = testing::read_file(dir.path() / "0.log"), log1 = testing::read_file(dir.path() / "1.log");
  ASSERT_TRUE(code0 && code1) << "a rank hung\n" << log0 << "\n---\n" << log1;
  EXPECT_EQ(*code0, 0) << log0;
  EXPECT_EQ(*code1, 0) << log1;
  EXPECT_THAT(log0, HasSubstr("backend gloo, rank 0 of 2"));
  EXPECT_THAT(log0, HasSubstr("PROBE OK rank 0 of 2"));
  EXPECT_THAT(log1, HasSubstr("PROBE OK rank 1 of 2"));
  EXPECT_THAT(log0, Not(HasSubstr("MISMATCH")));
}

TEST(GlooProcessGroup, ADeadPeerIsAnErrorNotAHang) {
  TempDir dir;
  const int port = testing::free_port();
  const auto start = std::chrono::steady_clock::now();
  ChildProcess rank0({testing::configured::distributed_probe(), "die"}, rank_environment(0, 2, port), dir.path(),
                     dir.path() / "0.log");
  ChildProcess rank1({testing::configured::distributed_probe(), "die"}, rank_environment(1, 2, port), dir.path(),
                     dir.path() / "1.log");
  const auto code0 = rank0.wait_for(60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string log0 = testing::read_file(dir.path() / "0.log");
  ASSERT_TRUE(code0) << "rank 0 hung with a dead peer\n" << log0;
  EXPECT_EQ(*code0, 0) << log0;
  EXPECT_THAT(log0, HasSubstr("caught after"));
  EXPECT_THAT(log0, HasSubstr("distributed all_reduce(sum) failed on rank 0 of 2 (gloo)"));
  EXPECT_LT(seconds, 45.0);  // the probe's timeout is 30 s
  EXPECT_EQ(rank1.wait_for(10), 9);
}

// fp8_delayed all-reduces each step's amaxes (slot 0 of every history, max) before its
// update, so that every rank casts with the same scales. The ranks see different shards of
// the data, so their inputs' and output gradients' amaxes differ before the all-reduce (with
// it removed from plugins/precision/fp8_delayed, this test fails on the histories); the
// gradient average alone keeps the weights equal.
TEST(GlooProcessGroup, TwoRanksUnderFp8DelayedKeepOneAmaxHistoryAndOneSetOfWeights) {
  TempDir dir;
  dir.write("r.yaml",
            "plugins: [" + testing::configured::fixture_plugin_dir() + "/libmixt_fixture_float8_outliers.so]\n" +
                "model: {name: fixture_float8_outliers, outliers_from_step: 1000000}\n"
                "precision: {name: fp8_delayed, amax_history_len: 4}\n"
                "optimizer: {name: sgd, lr: 0.05}\n"
                "data: {train: {name: synthetic, shape: [8], num_classes: 4, size: 256, batch_size: 32}}\n"
                "trainer: {device: cpu, epochs: 1, seed: 0, threads: 1, log_every: 1000, max_steps_per_epoch: 6,\n"
                "          distributed: {backend: gloo, timeout: 30}}\n");
  const int port = testing::free_port();
  const std::string recipe = (dir.path() / "r.yaml").string(), out = dir.path().string();
  ChildProcess rank0({testing::configured::distributed_probe(), "train", recipe, out}, rank_environment(0, 2, port),
                     dir.path(), dir.path() / "0.log");
  ChildProcess rank1({testing::configured::distributed_probe(), "train", recipe, out}, rank_environment(1, 2, port),
                     dir.path(), dir.path() / "1.log");
  const auto code0 = rank0.wait_for(120), code1 = rank1.wait_for(20);
  const std::string log0 = testing::read_file(dir.path() / "0.log"), log1 = testing::read_file(dir.path() / "1.log");
  ASSERT_TRUE(code0 && code1) << "a rank hung\n" << log0 << "\n---\n" << log1;
  ASSERT_EQ(*code0, 0) << log0;
  ASSERT_EQ(*code1, 0) << log1;

  torch::serialize::InputArchive a, b;
  a.load_from((dir.path() / "rank0.pt").string());
  b.load_from((dir.path() / "rank1.pt").string());
  for (const char* key : {"fp8_amax_history", "fp8_scales", "optimizer_parameters", "model_parameters"}) {
    at::Tensor x, y;
    a.read(key, x);
    b.read(key, y);
    EXPECT_TRUE(at::equal(x, y)) << key << " differs between the ranks\n" << x << "\n" << y;
  }
  // Two float8 layers (hidden, spiky), three tensors each, 4 steps of history: after 6
  // steps every slot but the freshly zeroed one holds a step's amax; the scales moved off 1.
  at::Tensor history, scales;
  a.read("fp8_amax_history", history);
  a.read("fp8_scales", scales);
  EXPECT_EQ(history.sizes(), (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_TRUE(history.slice(2, 1).gt(0).all().item<bool>()) << history;
  EXPECT_FALSE(scales.eq(1).any().item<bool>()) << scales;
}

// Gloo comes from libtorch_cpu: mixt compiles against libgloo-dev's headers but must not
// link (or load) Debian's libgloo.
TEST(GlooProcessGroup, LibmixtLinksNoLibgloo) {
  const testing::CommandResult result = [] {
    testing::CommandResult r;
    FILE* pipe = ::popen(("readelf -d " + testing::configured::binary_dir() + "/lib/libmixt.so 2>&1").c_str(), "r");
    char buffer[4096];
    std::size_t got = 0;
    while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, got);
    r.exit_code = ::pclose(pipe);
    return r;
  }();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("[libtorch_cpu.so]"));
  EXPECT_THAT(result.output, Not(HasSubstr("gloo")));
}

}  // namespace
}  // namespace mixt
