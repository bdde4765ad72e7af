// recompute_in_backward(): the reentrant form of torch.utils.checkpoint
// (torch/utils/checkpoint.py, CheckpointFunction), written as a C++ autograd function. The
// non-reentrant Python form rests on saved-tensor hooks, which LibTorch offers to Python only.
//
// Forward (under no_grad, as every custom function's forward): remember the input, the
// generators' states and the autocast state, run the block and keep nothing it made.
// Backward: restore them, run the block again with grad on a detached copy of the input, and
// backpropagate the incoming gradient through that graph, which accumulates into every leaf
// the block reached (its parameters) as the plain backward would, then hand the input's
// gradient on.
#include "mixt/helpers/activation_checkpointing.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "mixt/autocast.h"
#include "sdk/helpers/block_gates.h"
#include "sdk/helpers/routed_models.h"

namespace mixt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

thread_local bool recomputing_now = false;

class RecomputingScope {
 public:
  RecomputingScope() : previous_(recomputing_now) { recomputing_now = true; }
  ~RecomputingScope() { recomputing_now = previous_; }
  RecomputingScope(const RecomputingScope&) = delete;
  RecomputingScope& operator=(const RecomputingScope&) = delete;

 private:
  bool previous_;
};

// Turns the autocast cast cache off for a scope, and back to what it was.
class CastCacheOff {
 public:
  CastCacheOff() : previous_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~CastCacheOff() { at::autocast::set_autocast_cache_enabled(previous_); }
  CastCacheOff(const CastCacheOff&) = delete;
  CastCacheOff& operator=(const CastCacheOff&) = delete;

 private:
  bool previous_;
};

struct AutocastState {
  at::DeviceType device = at::kCPU;
  bool enabled = false;
  at::ScalarType dtype = at::kFloat;

  static AutocastState of(at::DeviceType device) {
    return {device, at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)};
  }
};

// A generator's state, and putting it back for the length of the recomputation.
struct GeneratorState {
  mutable at::Generator generator;  // a handle: reading or setting its state locks its mutex
  at::Tensor state;

  static GeneratorState of(at::Generator generator) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    at::Tensor state = generator.get_state();
    return {std::move(generator), std::move(state)};
  }
  // Sets the saved state and returns the current one.
  GeneratorState swap_in() const {
    std::lock_guard<std::mutex> lock(generator.mutex());
    GeneratorState current{generator, generator.get_state()};
    generator.set_state(state);
    return current;
  }
  void restore() const {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
};

// What the first run of a block saw, kept until its backward: the autograd context holds
// IValues only, so this travels as a capsule.
struct FirstRun : torch::CustomClassHolder {
  BlockForward forward;
  std::vector<GeneratorState> generators;
  std::vector<AutocastState> autocast;
  bool cache_enabled = true;
  bool input_required_grad = false;
};

struct RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
  // `anchor`: a leaf that requires grad, given when the input does not, so that the output
  // is part of the graph and the block's parameters get their gradients.
  static at::Tensor forward(AutogradContext* ctx, const c10::intrusive_ptr<FirstRun>& run, const at::Tensor& input,
                            const std::optional<at::Tensor>& anchor) {
    at::Tensor output;
    {
      // The casts of this run must not stay in the cache: made without grad, they would be
      // what a later use of the same weight in this autocast region finds.
      const CastCacheOff no_cache;
      output = run->forward(input);
    }
    ctx->saved_data["run"] = c10::IValue::make_capsule(run);
    ctx->save_for_backward({input});
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto run = c10::static_intrusive_pointer_cast<FirstRun>(ctx->saved_data["run"].toCapsule());
    const at::Tensor saved = ctx->get_saved_variables()[0];
    at::Tensor input = saved.detach();
    input.requires_grad_(run->input_required_grad);

    std::vector<GeneratorState> current;
    current.reserve(run->generators.size());
    for (const GeneratorState& generator : run->generators) current.push_back(generator.swap_in());
    at::Tensor output;
    try {
      RecomputingScope recomputing;
      at::AutoGradMode grad(true);
      std::vector<AutocastScope> autocast;
      autocast.reserve(run->autocast.size());
      for (const AutocastState& state : run->autocast) {
        autocast.emplace_back(state.device, state.dtype, state.enabled, run->cache_enabled);
      }
      output = run->forward(input);
    } catch (...) {
      for (const GeneratorState& generator : current) generator.restore();
      throw;
    }
    for (const GeneratorState& generator : current) generator.restore();

    if (output.requires_grad()) torch::autograd::backward({output}, {grad_outputs[0]});
    // One gradient per forward argument: none for the first run and the anchor.
    return {at::Tensor(), run->input_required_grad ? input.grad() : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor recompute_in_backward(BlockForward forward, const at::Tensor& input) {
  if (!at::GradMode::is_enabled()) return forward(input);
  auto run = c10::make_intrusive<FirstRun>();
  run->forward = std::move(forward);
  run->generators.push_back(GeneratorState::of(at::detail::getDefaultCPUGenerator()));
  run->autocast.push_back(AutocastState::of(at::kCPU));
  if (input.device().type() != at::kCPU) {
    run->generators.push_back(GeneratorState::of(at::globalContext().defaultGenerator(input.device())));
    run->autocast.push_back(AutocastState::of(input.device().type()));
  }
  run->cache_enabled = at::autocast::is_autocast_cache_enabled();
  run->input_required_grad = input.requires_grad();
  std::optional<at::Tensor> anchor;
  if (!input.requires_grad()) anchor = at::empty({0}, input.options().dtype(at::kFloat)).requires_grad_();
  return RecomputeFunction::apply(run, input, anchor);
}

bool recomputing() { return recomputing_now; }

namespace {
// Most runs checkpoint nothing: a count lets their routed calls skip the lock (a model
// destroyed with its choice still set keeps it counted: only the fast path is lost).
std::atomic<int> checkpointing_models{0};
}  // namespace

void set_activation_checkpointing(const torch::nn::Module& model, ActivationCheckpointing choice) {
  std::lock_guard<std::mutex> lock(routing::mutex());
  routing::RoutedModel& entry = routing::find_or_add(model);
  const bool was = entry.checkpoints();
  entry.checkpoint_all_blocks = choice.all_blocks;
  entry.checkpoint_listed = {choice.names.begin(), choice.names.end()};
  entry.checkpoint_routed.clear();
  entry.checkpointed.clear();
  const bool is = entry.checkpoints();
  if (was != is) checkpointing_models.fetch_add(is ? 1 : -1);
  routing::drop_if_empty(model);
}

bool checkpoints_activations(const torch::nn::Module& model, std::string_view name, bool block) {
  // Every routed call passes here before its forward: a block's gate opens first.
  if (block && !recomputing()) routing::enter_block(model, name);
  if (checkpointing_models.load(std::memory_order_relaxed) <= 0) return false;
  std::lock_guard<std::mutex> lock(routing::mutex());
  routing::RoutedModel* entry = routing::find(model);
  if (!entry) return false;
  const bool listed = entry->checkpoint_listed.count(name) > 0;
  if (!listed && !(block && entry->checkpoint_all_blocks)) return false;
  if (entry->checkpoint_routed.insert(std::string(name)).second) entry->checkpointed.emplace_back(name);
  return true;
}

std::vector<std::string> checkpointed_submodules(const torch::nn::Module& model) {
  std::lock_guard<std::mutex> lock(routing::mutex());
  const routing::RoutedModel* entry = routing::find(model);
  return entry ? entry->checkpointed : std::vector<std::string>{};
}

std::vector<std::string> unrouted_checkpointed_submodules(const torch::nn::Module& model) {
  std::lock_guard<std::mutex> lock(routing::mutex());
  std::vector<std::string> missing;
  const routing::RoutedModel* entry = routing::find(model);
  if (!entry) return missing;
  std::set_difference(entry->checkpoint_listed.begin(), entry->checkpoint_listed.end(),
                      entry->checkpoint_routed.begin(), entry->checkpoint_routed.end(), std::back_inserter(missing));
  return missing;
}

}  // namespace mixt
