// The workers of a torchelastic job agree on which attempt they are in through the agent's
// store, which outlives the attempts and so still holds the keys of the one before. On two
// nodes the agents' TORCHELASTIC_RESTART_COUNTs differ (the healthy node's agent counts a
// peer's restart as a membership change), so mixt cannot key on them: a real TCPStore here,
// the ranks as threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "distributed/attempt.h"
#include "mixt/error.h"

namespace mixt {
namespace {

using distributed::agree_on_attempt;
using namespace std::chrono_literals;

class AgentStore {
 public:
  AgentStore() {
    c10d::TCPStoreOptions options;
    options.port = 0;  // any free port
    options.isServer = true;
    options.waitWorkers = false;
    server_ = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  }
  // What one worker connects to: a client of the agent's store, under mixt's job prefix.
  c10::intrusive_ptr<c10d::Store> worker() const {
    c10d::TCPStoreOptions options;
    options.port = server_->getPort();
    options.waitWorkers = false;
    options.timeout = 10s;
    return c10::make_intrusive<c10d::PrefixStore>("/mixt/job",
                                                  c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options));
  }

 private:
  c10::intrusive_ptr<c10d::TCPStore> server_;
};

// Each rank of one attempt in a thread of its own, rank 0 started `rank_0_after` the others.
std::vector<std::int64_t> attempt(const AgentStore& agent, int world, std::chrono::milliseconds rank_0_after = 0ms) {
  std::vector<std::future<std::int64_t>> ranks;
  for (int rank = world - 1; rank >= 0; --rank) {
    if (rank == 0) std::this_thread::sleep_for(rank_0_after);
    ranks.push_back(std::async(std::launch::async, [&agent, rank, world] {
      const auto store = agent.worker();
      return agree_on_attempt(*store, rank, world, 20s);
    }));
  }
  std::vector<std::int64_t> numbers;
  for (auto& rank : ranks) numbers.push_back(rank.get());
  return numbers;
}

TEST(JobAttempt, EveryRankOfEachAttemptAgreesOnItsNumber) {
  AgentStore agent;
  EXPECT_THAT(attempt(agent, 3), ::testing::Each(1));
  // The others start first and read attempt 1's number and welcomes, still in the store:
  // they must wait for this attempt's rank 0, not join the last one.
  EXPECT_THAT(attempt(agent, 3, 500ms), ::testing::Each(2));
  EXPECT_THAT(attempt(agent, 3, 50ms), ::testing::Each(3));
}

// A worker killed before it reached the store (the "killed at once"): its attempt's
// rank 0 fails within the timeout, naming it, and the next attempt still agrees.
TEST(JobAttempt, ARankThatNeverCameFailsRankZeroInTimeAndTheNextAttemptAgrees) {
  AgentStore agent;
  const auto store = agent.worker();
  const auto started = std::chrono::steady_clock::now();
  try {
    agree_on_attempt(*store, 0, 2, 300ms);
    FAIL() << "rank 0 agreed with a rank that never came";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::runtime);
    EXPECT_THAT(error.message(), ::testing::HasSubstr("for rank 1 to join"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  // Rank 1 of the next attempt finds attempt 1 open, greets it, and is never welcomed there.
  const auto numbers = attempt(agent, 2, 300ms);
  EXPECT_THAT(numbers, ::testing::Each(2));
}

// A rank whose rank 0 never comes fails within the timeout too, naming rank 0.
TEST(JobAttempt, ARankWithoutRankZeroFailsWithinTheTimeout) {
  AgentStore agent;
  const auto store = agent.worker();
  try {
    agree_on_attempt(*store, 1, 2, 300ms);
    FAIL() << "rank 1 agreed without a rank 0";
  } catch (const Error& error) {
    EXPECT_THAT(error.message(), ::testing::HasSubstr("for rank 0 to join"));
  }
}

}  // namespace
}  // namespace mixt
