#include "distributed/attempt.h"

#include <unistd.h>

#include <random>
#include <string>
#include <thread>

#include "mixt/error.h"

namespace mixt::distributed {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kCounter = "attempts";  // how many attempts rank 0 has opened
constexpr const char* kCurrent = "attempt";   // the newest of them
constexpr auto kPoll = std::chrono::milliseconds(20);

std::string key(std::int64_t attempt, const char* what, int rank) {
  return "attempt_" + std::to_string(attempt) + "/" + what + "_" + std::to_string(rank);
}

// Different for every worker process of every attempt, on every node.
std::string fresh_nonce(int rank) {
  std::random_device device;
  const auto now = Clock::now().time_since_epoch().count();
  return std::to_string(rank) + "-" + std::to_string(::getpid()) + "-" + std::to_string(now) + "-" +
         std::to_string(device()) + std::to_string(device());
}

std::int64_t newest_attempt(c10d::Store& job) {
  if (!job.check({kCurrent})) return 0;
  return std::stoll(job.get_to_str(kCurrent));
}

[[noreturn]] void timed_out(int rank, std::chrono::milliseconds timeout, const std::string& waiting_for) {
  throw runtime_error("rank " + std::to_string(rank) + " waited " + std::to_string(timeout.count() / 1000) + " s for " +
                          waiting_for + " to join this attempt of the job",
                      "every rank of every node must be restarted together (torchrun on each node, the same "
                      "--rdzv-endpoint and --rdzv-id); trainer.distributed.timeout bounds the wait");
}

std::int64_t open_attempt(c10d::Store& job, int world_size, Clock::time_point deadline,
                          std::chrono::milliseconds timeout) {
  const std::int64_t attempt = job.add(kCounter, 1);
  job.set(kCurrent, std::to_string(attempt));
  for (int rank = 1; rank < world_size; ++rank) {
    const std::string hello = key(attempt, "hello", rank);
    while (!job.check({hello})) {
      if (Clock::now() >= deadline) timed_out(0, timeout, "rank " + std::to_string(rank));
      std::this_thread::sleep_for(kPoll);
    }
    job.set(key(attempt, "welcome", rank), job.get_to_str(hello));
  }
  return attempt;
}

std::int64_t join_attempt(c10d::Store& job, int rank, Clock::time_point deadline, std::chrono::milliseconds timeout) {
  const std::string nonce = fresh_nonce(rank);
  std::int64_t greeted = 0;
  while (Clock::now() < deadline) {
    const std::int64_t attempt = newest_attempt(job);
    if (attempt > 0) {
      if (attempt != greeted) {
        job.set(key(attempt, "hello", rank), nonce);
        greeted = attempt;
      }
      const std::string welcome = key(attempt, "welcome", rank);
      if (job.check({welcome}) && job.get_to_str(welcome) == nonce) return attempt;
    }
    std::this_thread::sleep_for(kPoll);
  }
  timed_out(rank, timeout, "rank 0");
}

}  // namespace

std::int64_t agree_on_attempt(c10d::Store& job, int rank, int world_size, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  try {
    return rank == 0 ? open_attempt(job, world_size, deadline, timeout) : join_attempt(job, rank, deadline, timeout);
  } catch (const c10::Error& error) {
    throw runtime_error("rank " + std::to_string(rank) +
                            ": the elastic agent's store failed while the ranks agreed "
                            "on the attempt: " +
                            error.what_without_backtrace(),
                        "check that the node hosting the store (--rdzv-conf is_host=1) is up");
  }
}

}  // namespace mixt::distributed
