// The c10d key-value store through which the ranks find each other.
#pragma once

#include <chrono>
#include <cstdint>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/environment.h"

namespace mixt::distributed {

struct Stores {
  // What the process group is made with: this attempt's keys only.
  c10::intrusive_ptr<c10d::Store> attempt;
  // Keys every attempt of the job sees (under /mixt/job), where the store outlives an
  // attempt: the elastic agent's. Null otherwise.
  c10::intrusive_ptr<c10d::Store> job;
  // This attempt's 1-based number where the ranks agreed on it through the job store
  // (distributed/attempt.h); 0 where the store is this attempt's own and the caller agrees.
  std::int64_t attempt_number = 0;
};

// Under torchelastic with TORCHELASTIC_USE_AGENT_STORE=True, a TCPStore client of the
// agent's store at MASTER_ADDR:MASTER_PORT, under the prefix /mixt/attempt_<agreed number>;
// otherwise rank 0 hosts a c10d::TCPStore there (new with every attempt) and the other
// ranks connect to it.
Stores make_store(const LaunchEnvironment& environment, std::chrono::milliseconds timeout);

}  // namespace mixt::distributed
