#include "sdk/helpers/block_gates.h"

#include <atomic>
#include <map>
#include <mutex>

namespace mixt::routing {

namespace {
std::mutex gates_mutex;
std::map<const torch::nn::Module*, BlockGate*> gates;
std::atomic<int> gate_count{0};
}  // namespace

void set_block_gate(const torch::nn::Module& model, BlockGate* gate) {
  std::lock_guard<std::mutex> lock(gates_mutex);
  if (gate) {
    gates[&model] = gate;
  } else {
    gates.erase(&model);
  }
  gate_count.store(static_cast<int>(gates.size()));
}

void enter_block(const torch::nn::Module& model, std::string_view block) {
  if (gate_count.load(std::memory_order_relaxed) == 0) return;
  BlockGate* gate = nullptr;
  {
    std::lock_guard<std::mutex> lock(gates_mutex);
    const auto found = gates.find(&model);
    if (found != gates.end()) gate = found->second;
  }
  // Outside the lock: the gate runs collectives.
  if (gate) gate->entering(block);
}

}  // namespace mixt::routing
