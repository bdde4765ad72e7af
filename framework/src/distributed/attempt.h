// Which attempt of a torchelastic job this is, agreed by every worker through the elastic
// agent's store, which outlives the attempts.
//
// TORCHELASTIC_RESTART_COUNT cannot say it: each node's agent counts its own restarts, and
// the agent of a healthy node counts a peer's restart as a membership change, not a restart
// (torch/distributed/elastic/agent/server/api.py). Across two nodes the workers of one
// attempt see different counts, so keys built on the count part them.
#pragma once

#include <chrono>
#include <cstdint>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace mixt::distributed {

// The 1-based number of this attempt, the same on every worker of it. Rank 0 opens a new
// attempt number; every other rank hands it a fresh nonce and waits for it to be echoed, so
// a value left by an earlier attempt (whose workers are all gone before the next one
// starts: the agents stop them before the next rendezvous) is never taken for this one's.
// Throws mixt::Error (runtime) naming the rank when `timeout` passes first.
std::int64_t agree_on_attempt(c10d::Store& job, int rank, int world_size, std::chrono::milliseconds timeout);

}  // namespace mixt::distributed
