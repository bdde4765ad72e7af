#include "distributed/environment.h"

#include <cstdlib>

#include "mixt/error.h"

namespace mixt::distributed {

namespace {

const char* get(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

int integer(const char* name, int fallback, int minimum, int maximum) {
  const char* text = get(name);
  if (!text) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < minimum || value > maximum) {
    throw usage_error(std::string("environment variable ") + name + "='" + text + "' is not an integer in [" +
                          std::to_string(minimum) + ", " + std::to_string(maximum) + "]",
                      "launch with torchrun --nproc-per-node=N, which sets it");
  }
  return static_cast<int>(value);
}

}  // namespace

std::optional<LaunchEnvironment> LaunchEnvironment::from_process_environment() {
  if (!get("RANK") && !get("WORLD_SIZE")) return std::nullopt;
  if (!get("RANK") || !get("WORLD_SIZE")) {
    throw usage_error(std::string("distributed launch: ") + (get("RANK") ? "WORLD_SIZE" : "RANK") +
                          " is not set, but " + (get("RANK") ? "RANK" : "WORLD_SIZE") + " is",
                      "launch with torchrun, which sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
  }
  LaunchEnvironment e;
  e.world_size = integer("WORLD_SIZE", 1, 1, 1 << 20);
  e.rank = integer("RANK", 0, 0, e.world_size - 1);
  e.local_world_size = integer("LOCAL_WORLD_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = integer("LOCAL_RANK", e.rank % e.local_world_size, 0, e.local_world_size - 1);
  if (const char* addr = get("MASTER_ADDR")) e.master_addr = addr;
  e.master_port = integer("MASTER_PORT", e.master_port, 1, 65535);
  e.restart_count = integer("TORCHELASTIC_RESTART_COUNT", 0, 0, 1 << 30);
  if (const char* id = get("TORCHELASTIC_RUN_ID")) e.run_id = id;
  const char* agent = get("TORCHELASTIC_USE_AGENT_STORE");
  e.use_agent_store = agent && std::string(agent) == "True";  // what torch.distributed compares with
  if (e.world_size > 1 && !get("MASTER_ADDR")) {
    throw usage_error("distributed launch with WORLD_SIZE=" + std::to_string(e.world_size) +
                          ": MASTER_ADDR is not set",
                      "launch with torchrun, or set MASTER_ADDR and MASTER_PORT to rank 0's host and a free port");
  }
  return e;
}

}  // namespace mixt::distributed
