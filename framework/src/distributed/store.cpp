#include "distributed/store.h"

#include <c10/util/Logging.h>

#include <cstdlib>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "distributed/attempt.h"
#include "mixt/error.h"

namespace mixt::distributed {

namespace {
// While connecting, c10d logs every failed try as an error with a C++ backtrace; mixt
// reports the outcome once, as a mixt error. TORCH_CPP_LOG_LEVEL (set by the user) wins.
class QuietConnectLogs {
 public:
  QuietConnectLogs() : saved_(FLAGS_caffe2_log_level) {
    if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = 3;  // FATAL only
  }
  ~QuietConnectLogs() { FLAGS_caffe2_log_level = saved_; }

 private:
  int saved_;
};
}  // namespace

Stores make_store(const LaunchEnvironment& e, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(e.master_port);
  options.numWorkers = static_cast<std::size_t>(e.world_size);
  options.timeout = timeout;
  QuietConnectLogs quiet;
  try {
    if (e.use_agent_store) {
      // torch.distributed's env:// rendezvous (torch/distributed/rendezvous.py,
      // _create_c10d_store) connects every worker as a client of the store the elastic agent
      // hosts. The agent keeps that store across restarts, so the keys of a failed attempt are
      // still there: each attempt works under a prefix of its own, numbered by agreement
      // (distributed/attempt.h), never by TORCHELASTIC_RESTART_COUNT, which differs by node.
      options.isServer = false;
      options.waitWorkers = false;
      auto client = c10::make_intrusive<c10d::TCPStore>(e.master_addr, options);
      auto job = c10::make_intrusive<c10d::PrefixStore>("/mixt/job", client);
      const std::int64_t attempt = agree_on_attempt(*job, e.rank, e.world_size, timeout);
      return {c10::make_intrusive<c10d::PrefixStore>("/mixt/attempt_" + std::to_string(attempt), client), job, attempt};
    }
    options.isServer = e.rank == 0;
    options.waitWorkers = true;
    options.multiTenant = true;
    auto store = c10::make_intrusive<c10d::TCPStore>(e.master_addr, options);
    // Rank 0's process hosts it, so it ends with the attempt: one prefix serves them all.
    return {c10::make_intrusive<c10d::PrefixStore>("/mixt/attempt", store), nullptr};
  } catch (const c10::Error& error) {
    throw runtime_error("rank " + std::to_string(e.rank) + " could not reach the c10d store at " + e.master_addr +
                            ":" + std::to_string(e.master_port) + ": " + error.what_without_backtrace(),
                        "check MASTER_ADDR/MASTER_PORT, that every rank was started, and "
                        "trainer.distributed.timeout");
  }
}

}  // namespace mixt::distributed
