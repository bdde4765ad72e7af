// The c10d key-value store through which the ranks find each other.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include "distributed/environment.h"

namespace mixt::distributed {

struct Stores {
  // What the process group is made with: this attempt's keys only.
  c10::intrusive_ptr<c10d::Store> attempt;
  // Keys every attempt of the job sees (under /mixt/job), where the store outlives an
  // attempt: the elastic agent's. Null otherwise.
  c10::intrusive_ptr<c10d::Store> job;
};

// Under torchelastic with TORCHELASTIC_USE_AGENT_STORE=True, a TCPStore client of the
// agent's store at MASTER_ADDR:MASTER_PORT, under the prefix /worker/attempt_<restart>;
// otherwise rank 0 hosts a c10d::TCPStore there and the other ranks connect to it.
Stores make_store(const LaunchEnvironment& environment, std::chrono::milliseconds timeout);

}  // namespace mixt::distributed
