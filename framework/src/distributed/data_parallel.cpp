#include "distributed/data_parallel.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/interrupt.h"
#include "distributed/backends.h"
#include "distributed/store.h"
#include "mixt/error.h"
#include "mixt/helpers/nf4.h"
#include "mixt/version.h"

namespace mixt::distributed {

namespace {

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

GlooDevice gloo_device(const LaunchEnvironment& e) {
  GlooDevice device;
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
    device.interface = interface;
  } else if (e.world_size == e.local_world_size) {
    device.hostname = "127.0.0.1";  // every rank on this node: loopback
  }
  return device;
}

}  // namespace

DataParallel::DataParallel(const LaunchEnvironment& environment, const DistributedOptions& options,
                           at::Device device)
    : environment_(environment), options_(options), device_(device) {
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.timeout_seconds * 1000.0));
  std::string backend = options.backend;
  if (backend == "auto") backend = device.is_cuda() ? "nccl" : "gloo";
  if (backend == "nccl" && !device.is_cuda()) {
    throw recipe_error("nccl needs a CUDA device, but this run uses " + device.str(), {},
                       "trainer.distributed.backend", "use backend: gloo (or auto) on CPUs");
  }
  // Until every rank is connected there is nothing to save: a signal ends the wait.
  const ExitAtOnceOnSignal exit_at_once("mixt: interrupted while the ranks connected; nothing was done");
  if (interrupt_requested()) throw Error(ErrorKind::interrupted, "interrupted before the ranks connected");
  const Stores stores = make_store(environment, timeout);
  job_store_ = stores.job;
  store_ = stores.attempt;
  const auto& store = stores.attempt;
  c10::intrusive_ptr<c10d::Backend> process_group;
  try {
    process_group = backend == "nccl"
                        ? make_nccl_backend(store, environment.rank, environment.world_size, timeout, device)
                        : make_gloo_backend(store, environment.rank, environment.world_size, timeout,
                                            gloo_device(environment));
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& error) {
    throw runtime_error("rank " + std::to_string(environment.rank) + ": cannot create the " + backend +
                            " process group: " + error.what_without_backtrace(),
                        "every rank must be started (WORLD_SIZE=" + std::to_string(environment.world_size) +
                            ") within trainer.distributed.timeout");
  }
  communicator_ = std::make_unique<ProcessGroupCommunicator>(process_group, backend, environment.rank,
                                                             environment.world_size, timeout, device);
  // Without the agent's store the counts are all there is: the highest of them says
  // whether any node has restarted.
  attempt_ = stores.attempt_number > 0
                 ? stores.attempt_number
                 : 1 + static_cast<std::int64_t>(highest(static_cast<double>(environment.restart_count)));
}

bool DataParallel::all_ranks_agree(const std::string& text) const {
  const std::uint64_t hash = fnv1a(text);
  const auto high = static_cast<std::int64_t>(hash >> 32), low = static_cast<std::int64_t>(hash & 0xffffffffu);
  // max over ranks of (h, -h) gives (max h, -min h): equal to ours everywhere iff all agree.
  at::Tensor t = at::tensor({high, low, -high, -low}, at::TensorOptions().dtype(at::kLong)).to(device_);
  communicator_->all_reduce(t, ReduceOp::max);
  t = t.cpu();
  const auto* v = t.data_ptr<std::int64_t>();
  return v[0] == high && v[1] == low && v[2] == -high && v[3] == -low;
}

void DataParallel::check_same_recipe(const std::string& text) const {
  // Different builds of mixt (a node with an older install) would read the same recipe
  // alike and then part ways in their collectives: "Connection reset by peer" mid-run.
  const std::string build = std::string("mixt ") + version() + ", plugin ABI " + std::to_string(MIXT_ABI_MAJOR) +
                            "." + std::to_string(MIXT_ABI_MINOR) + ", " + build_fingerprint();
  if (!all_ranks_agree(build)) {
    throw usage_error("the ranks run different builds of mixt (rank " + std::to_string(rank()) + " runs " + build +
                          ")",
                      "start every rank with the same mixt: the same install on every node");
  }
  if (!all_ranks_agree(text)) {
    char mine[32];
    std::snprintf(mine, sizeof(mine), "%016llx", static_cast<unsigned long long>(fnv1a(text)));
    throw recipe_error("the resolved recipe differs across ranks (hash on rank " + std::to_string(rank()) + ": " +
                           mine + ")" + difference_from_rank_0(text),
                       {}, "", "start every rank with the same recipe file and the same overrides");
  }
}

// Where this rank's resolved recipe first differs from rank 0's (rank 0 publishes its own
// in the store; the barrier keeps a store that rank 0 hosts up until every rank has read
// it). "" on rank 0, when they differ only in length, or when the store fails: the hash
// message stands on its own.
std::string DataParallel::difference_from_rank_0(const std::string& text) const {
  constexpr const char* kKey = "mixt/resolved_recipe";
  std::string difference;
  try {
    if (rank() == 0) {
      store_->set(kKey, std::vector<std::uint8_t>(text.begin(), text.end()));
    } else {
      const std::vector<std::uint8_t> bytes = store_->get(kKey);
      std::istringstream theirs(std::string(bytes.begin(), bytes.end())), ours(text);
      std::string their_line, our_line;
      for (int line = 1; std::getline(ours, our_line); ++line) {
        if (!std::getline(theirs, their_line)) their_line = "(nothing)";
        if (our_line != their_line) {
          difference = "; line " + std::to_string(line) + " of the resolved recipe is '" + our_line +
                       "' here, '" + their_line + "' on rank 0";
          break;
        }
      }
    }
    barrier();
  } catch (const std::exception&) {
  }
  return difference;
}

void DataParallel::broadcast_model(torch::nn::Module& model) const {
  at::NoGradGuard no_grad;
  for (auto& p : model.parameters(/*recurse=*/true)) {
    // An NF4 weight's one number is no weight: every rank quantised model.from's the same way.
    if (!held_in_nf4(p)) communicator_->broadcast(p, 0);
  }
  for (auto& b : model.buffers(/*recurse=*/true)) communicator_->broadcast(b, 0);
}

void DataParallel::set_parameters(const std::vector<at::Tensor>& parameters) {
  // Reduce-scattered by the sharded optimizer instead: no all-reduce buckets to keep.
  if (reduce_scatters_gradients(options_.sharding)) return;
  const auto bytes = static_cast<std::int64_t>(options_.bucket_mb * 1024.0 * 1024.0);
  buckets_.emplace(parameters, bytes);
  if (options_.overlap) buckets_->enable_overlap(*communicator_);
}

void DataParallel::prepare_backward(bool last) {
  if (buckets_) buckets_->prepare_backward(last);
}

void DataParallel::average_gradients() {
  if (reduce_scatters_gradients(options_.sharding)) return;  // ShardedOptimizer::take_gradients reduces them
  if (!buckets_) throw runtime_error("DataParallel::average_gradients before set_parameters");
  buckets_->average(*communicator_);
}

StepAgreement DataParallel::agree_on_step(const at::Tensor& loss) const {
  const double mean = sum({loss.item<double>()})[0] / world_size();
  return {at::scalar_tensor(mean, at::TensorOptions().dtype(at::kDouble)), true};
}

double DataParallel::highest(double value) const {
  at::Tensor t = at::scalar_tensor(value, at::TensorOptions().dtype(at::kDouble)).to(device_);
  communicator_->all_reduce(t, ReduceOp::max);
  return t.cpu().item<double>();
}

std::vector<double> DataParallel::sum(const std::vector<double>& values) const {
  at::Tensor t = at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(device_);
  communicator_->all_reduce(t, ReduceOp::sum);
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

void DataParallel::check_in_sync(torch::nn::Module& model, const std::string& when, const std::string& hint) const {
  at::NoGradGuard no_grad;
  double sum = 0, squares = 0;
  for (const auto& p : model.parameters(/*recurse=*/true)) {
    const at::Tensor d = p.detach().to(at::kDouble);
    sum += d.sum().item<double>();
    squares += d.square().sum().item<double>();
  }
  at::Tensor t = at::tensor({sum, squares, -sum, -squares}, at::TensorOptions().dtype(at::kDouble)).to(device_);
  communicator_->all_reduce(t, ReduceOp::max);
  t = t.cpu();
  const auto* v = t.data_ptr<double>();
  for (double x : {sum, squares, v[0], v[1], v[2], v[3]}) {
    if (!std::isfinite(x)) return;  // diverged to inf/nan: nothing meaningful to compare
  }
  const bool same = std::memcmp(v, &sum, sizeof(double)) == 0 && std::memcmp(v + 1, &squares, sizeof(double)) == 0 &&
                    v[2] == -sum && v[3] == -squares;
  if (!same) {
    throw runtime_error("the model's parameters differ across ranks " + when + " (checksum on rank " +
                            std::to_string(rank()) + ": " + std::to_string(sum) + ", max over ranks " +
                            std::to_string(v[0]) + ")",
                        !hint.empty() ? hint
                                      : "every rank must take the same steps: a precision policy that skips steps "
                                        "must all-reduce its found-inf flag (PrecisionContext::communicator)");
  }
}

std::optional<std::string> DataParallel::job_value(const std::string& key) const {
  try {
    if (!job_store_ || !job_store_->check({key})) return std::nullopt;
    const std::vector<std::uint8_t> bytes = job_store_->get(key);
    return std::string(bytes.begin(), bytes.end());
  } catch (const c10::Error& error) {
    throw runtime_error("cannot read '" + key + "' from the elastic agent's store: " + error.what_without_backtrace());
  }
}

void DataParallel::set_job_value(const std::string& key, const std::string& value) const {
  try {
    if (job_store_) job_store_->set(key, value);
  } catch (const c10::Error& error) {
    throw runtime_error("cannot write '" + key + "' to the elastic agent's store: " + error.what_without_backtrace());
  }
}

}  // namespace mixt::distributed
