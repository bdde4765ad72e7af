// What torchrun (or Slurm, or a Kubernetes PyTorchJob) tells a worker through its
// environment. A process without RANK and WORLD_SIZE is not distributed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mixt::distributed {

struct LaunchEnvironment {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int restart_count = 0;        // TORCHELASTIC_RESTART_COUNT: 0 on the first attempt
  std::string run_id;           // TORCHELASTIC_RUN_ID; empty when not under torchelastic
  bool use_agent_store = false; // TORCHELASTIC_USE_AGENT_STORE=True: the agent hosts the store

  // Reads the variables; nothing when RANK and WORLD_SIZE are both absent. A malformed or
  // inconsistent value is a usage error naming the variable.
  static std::optional<LaunchEnvironment> from_process_environment();
};

}  // namespace mixt::distributed
