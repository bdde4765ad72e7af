#include "distributed/store.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <c10/util/Logging.h>

#include <cstdlib>

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
      // already hosts. The agent keeps that store across restarts (the static rendezvous
      // caches it), so the keys of a failed attempt are still there: a per-attempt prefix
      // keeps a restarted job from reading them, as earlier torch.distributed releases did (2.11 relies on a fresh
      // store per retry instead).
      options.isServer = false;
      options.waitWorkers = false;
      auto client = c10::make_intrusive<c10d::TCPStore>(e.master_addr, options);
      return {c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(e.restart_count), client),
              c10::make_intrusive<c10d::PrefixStore>("/mixt/job", client)};
    }
    options.isServer = e.rank == 0;
    options.waitWorkers = true;
    options.multiTenant = true;
    auto store = c10::make_intrusive<c10d::TCPStore>(e.master_addr, options);
    // Namespaced per attempt too, for a store that outlives an attempt (multi-tenant port).
    return {c10::make_intrusive<c10d::PrefixStore>("/mixt/attempt_" + std::to_string(e.restart_count), store),
            nullptr};
  } catch (const c10::Error& error) {
    throw runtime_error("rank " + std::to_string(e.rank) + " could not reach the c10d store at " + e.master_addr +
                            ":" + std::to_string(e.master_port) + ": " + error.what_without_backtrace(),
                        "check MASTER_ADDR/MASTER_PORT, that every rank was started, and "
                        "trainer.distributed.timeout");
  }
}

}  // namespace mixt::distributed
