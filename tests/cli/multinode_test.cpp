// Two nodes for real: two network namespaces joined by a veth pair, each with an address of
// its own, each running `torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d` as an
// operator would on two machines (Gloo over the veth, the elastic agents' stores across it).
// A plain job trains to the weights of one node with 4 ranks; a job whose worker on the
// second node is killed (at once, before the run directory exists, and after the first
// epoch) under --max-restarts=1 restarts, resumes and ends where the plain job ended; so do
// sharded jobs (ZeRO-2 on the CNN, ZeRO-3 on a small GPT-2) against one node's sharded run. Needs
// root and `ip netns`; skipped with the reason otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_weights.h"
#include "child_process.h"
#include "ranks.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

using testing::ChildProcess;
using testing::max_difference;
using testing::only_run_directory;

// 3 epochs of 4 steps of a global batch of 64 over 4 ranks, then an evaluation each.
const std::string kRecipe = R"(name: dp
model:     { name: simple_cnn, channels: [8, 16], hidden: 32 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.05, momentum: 0.9 }
data:
  train: { name: fashion_mnist, split: train, batch_size: 16, limit: 512 }
  val:   { name: fashion_mnist, split: test, batch_size: 64, limit: 256 }
trainer: { epochs: 3, seed: 0, threads: 1, log_every: 1, max_steps_per_epoch: 4,
           distributed: { backend: gloo, timeout: 60 } }
output: runs
)";

// ZeRO-3 across the nodes: a small GPT-2 whose blocks are gathered and released over the
// veth (trainer.distributed.sharding: parameters), 3 epochs of 4 steps of a global batch of 16.
const std::string kShardedLanguageModelRecipe = R"(name: dp
task:      { name: causal_lm }
model:     { name: gpt2, num_layers: 2, num_heads: 2, hidden_dim: 32, context_length: 32, dropout: 0, attention_dropout: 0 }
precision: { name: fp32 }
optimizer: { name: adamw, lr: 3.0e-3, weight_decay: 0.1 }
data:
  train: { name: text, context: 32, to: 0.5, batch_size: 4 }
  val:   { name: text, context: 32, from: 0.95, batch_size: 32 }
trainer: { epochs: 3, seed: 0, threads: 1, log_every: 1, max_steps_per_epoch: 4,
           distributed: { backend: gloo, timeout: 60, sharding: parameters } }
output: runs
)";

constexpr double kJobSeconds = 400;  // a job that is not done by then hangs

std::string run(const std::string& command) {
  const testing::CommandResult result = testing::run_command(command + " 2>&1");
  if (result.exit_code != 0) throw std::runtime_error(command + ": " + result.output);
  return result.output;
}

// Why two nodes cannot be made here, or nothing.
std::optional<std::string> why_no_two_nodes() {
  if (::geteuid() != 0) return "needs root for ip netns";
  if (std::system("command -v torchrun >/dev/null 2>&1") != 0) return "torchrun is not on PATH";
  const std::string probe = "mixt-probe-" + std::to_string(::getpid());
  if (std::system(("ip netns add " + probe + " >/dev/null 2>&1 && ip netns del " + probe).c_str()) != 0) {
    return "ip netns add fails here (no iproute2, or no permission to make network namespaces)";
  }
  return std::nullopt;
}

// The two nodes: namespaces a and b, addresses 10.251.N.1 and .2 on veth ends va and vb.
class TwoNodes {
 public:
  TwoNodes() : suffix_(std::to_string(::getpid() % 100000)), subnet_("10.251." + std::to_string(::getpid() % 250)) {
    run("ip netns add " + ns('a') + " && ip netns add " + ns('b'));
    run("ip link add " + veth('a') + " type veth peer name " + veth('b'));
    for (const char node : {'a', 'b'}) {
      run("ip link set " + veth(node) + " netns " + ns(node));
      run("ip -n " + ns(node) + " addr add " + address(node) + "/24 dev " + veth(node));
      run("ip -n " + ns(node) + " link set " + veth(node) + " up && ip -n " + ns(node) + " link set lo up");
    }
  }
  ~TwoNodes() { std::system(("ip netns del " + ns('a') + "; ip netns del " + ns('b')).c_str()); }
  TwoNodes(const TwoNodes&) = delete;
  TwoNodes& operator=(const TwoNodes&) = delete;

  std::string ns(char node) const { return std::string("mixt-") + node + "-" + suffix_; }
  std::string veth(char node) const { return std::string("mx") + node + suffix_; }
  std::string address(char node) const { return subnet_ + (node == 'a' ? ".1" : ".2"); }

  // torchrun on `node` for job `id`: node a hosts the rendezvous store.
  // Each job its own rendezvous port: the last job's may still be in TIME_WAIT.
  std::unique_ptr<ChildProcess> torchrun(char node, const std::string& id, int port, const TempDir& dir,
                                         const std::vector<std::string>& overrides,
                                         const std::string& recipe = "r.yaml") const {
    std::vector<std::string> argv = {"ip",
                                     "netns",
                                     "exec",
                                     ns(node),
                                     "torchrun",
                                     "--nnodes=2",
                                     "--nproc-per-node=2",
                                     "--rdzv-backend=c10d",
                                     "--rdzv-endpoint=" + address('a') + ":" + std::to_string(port),
                                     "--rdzv-id=" + id,
                                     "--local-addr=" + address(node),
                                     "--max-restarts=1",
                                     "--no-python"};
    if (node == 'a') argv.insert(argv.begin() + 11, "--rdzv-conf=is_host=1");
    argv.push_back(testing::configured::mixt_executable());
    argv.push_back("run");
    argv.push_back(recipe);
    argv.insert(argv.end(), overrides.begin(), overrides.end());
    return std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"GLOO_SOCKET_IFNAME=" + veth(node), "OMP_NUM_THREADS=1"}, dir.path(),
        dir.path() / (id + "-" + node + ".log"));
  }

 private:
  std::string suffix_;
  std::string subnet_;
};

// The mixt workers torchrun `agent` started (its children running mixt).
std::vector<pid_t> workers_of(pid_t agent) {
  std::vector<pid_t> workers;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, command, state;
    pid_t parent = 0;
    if (!(stat >> pid >> command >> state >> parent) || parent != agent) continue;
    if (command == "(mixt)") workers.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return workers;
}

// Whether a run under `runs` (OUTPUT/<name>) has written its first epoch's checkpoint.
bool has_first_epoch_checkpoint(const fs::path& runs) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(runs, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (fs::exists(it->path() / "checkpoints" / "epoch-0001", ec)) return true;
  }
  return false;
}

// Waits until `ready` holds (or the deadline), then kills one of node b's workers.
bool kill_a_worker_of_b_when(ChildProcess& node_b, const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::vector<pid_t> workers = workers_of(node_b.pid());
    if (!workers.empty() && ready()) {
      ::kill(workers.front(), SIGKILL);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

struct JobEnd {
  std::optional<int> node_a, node_b;
  std::string logs;
};

JobEnd wait_for_job(ChildProcess& a, ChildProcess& b, const TempDir& dir, const std::string& id) {
  JobEnd end;
  end.node_a = a.wait_for(kJobSeconds);
  end.node_b = b.wait_for(10);
  for (const char node : {'a', 'b'}) {
    end.logs += std::string("--- node ") + node + "\n" + testing::read_file(dir.path() / (id + "-" + node + ".log"));
  }
  return end;
}

std::map<std::string, at::Tensor> final_weights(const TempDir& dir, const std::string& output) {
  const fs::path checkpoint = only_run_directory(dir.path() / output / "dp") / "checkpoints" / "epoch-0003";
  CheckpointContents contents = read_checkpoint(checkpoint);
  std::map<std::string, at::Tensor> weights;
  for (const auto& [name, tensor] : checkpoint_weights(contents, checkpoint, false)) weights[name] = tensor;
  return weights;
}

int repeats() {
  const char* text = std::getenv("MIXT_MULTINODE_REPEATS");
  return text ? std::max(1, std::atoi(text)) : 1;
}

TEST(MultiNode, TwoNodesTrainAsOneAndAWorkerKilledOnOneNodeIsRestartedWhereTheJobStood) {
  if (const auto why = why_no_two_nodes()) GTEST_SKIP() << *why;
  TwoNodes nodes;
  TempDir dir;
  dir.write("r.yaml", kRecipe);

  const auto one_node = testing::run_ranks(dir, 4, {{"output=one-node"}}, 240);
  for (const auto& rank : one_node) ASSERT_EQ(rank.exit_code, 0) << rank.log;
  // The sharded jobs' reference: Gloo's reduce-scatter sums 4 ranks in another order than
  // its all-reduce, so sharded weights are compared with a sharded run.
  const auto one_node_sharded =
      testing::run_ranks(dir, 4, {{"output=one-node-sharded", "trainer.distributed.sharding=gradients"}}, 240);
  for (const auto& rank : one_node_sharded) ASSERT_EQ(rank.exit_code, 0) << rank.log;
  const auto sharded_reference = final_weights(dir, "one-node-sharded");
  dir.write("lm.yaml", kShardedLanguageModelRecipe);
  const auto one_node_zero3 = testing::run_ranks(dir, 4, {{"output=one-node-zero3"}}, 240, {"run", "lm.yaml"});
  for (const auto& rank : one_node_zero3) ASSERT_EQ(rank.exit_code, 0) << rank.log;
  const auto zero3_reference = final_weights(dir, "one-node-zero3");

  int port = 29411;
  auto a = nodes.torchrun('a', "plain", port, dir, {"output=plain"});
  auto b = nodes.torchrun('b', "plain", port, dir, {"output=plain"});
  JobEnd plain = wait_for_job(*a, *b, dir, "plain");
  ASSERT_EQ(plain.node_a, 0) << plain.logs;
  ASSERT_EQ(plain.node_b, 0) << plain.logs;
  const auto reference = final_weights(dir, "plain");
  const double across_nodes = max_difference(final_weights(dir, "one-node"), reference);
  std::printf("two nodes vs one node, 4 ranks each: max |w| difference %.3g\n", across_nodes);
  EXPECT_LT(across_nodes, 1e-6);

  // Then sharded jobs (trainer.distributed.sharding: gradients, and parameters on a
  // language model), whose restart resumes every rank's optimizer shard written beside the
  // epoch's checkpoint.
  enum class Job { plain, gradients, parameters };
  struct Kill {
    bool at_once;
    Job job;
    const char* name;
  };
  for (int round = 0; round < repeats(); ++round) {
    for (const Kill kill :
         {Kill{true, Job::plain, "at-once-"}, Kill{false, Job::plain, "after-epoch-"},
          Kill{false, Job::gradients, "sharded-after-epoch-"}, Kill{false, Job::parameters, "zero3-after-epoch-"}}) {
      const bool at_once = kill.at_once;
      const std::string id = kill.name + std::to_string(round);
      SCOPED_TRACE(id);
      const fs::path runs = dir.path() / id / "dp";
      ++port;
      std::vector<std::string> overrides{"output=" + id};
      if (kill.job == Job::gradients) overrides.push_back("trainer.distributed.sharding=gradients");
      const std::string recipe = kill.job == Job::parameters ? "lm.yaml" : "r.yaml";
      a = nodes.torchrun('a', id, port, dir, overrides, recipe);
      b = nodes.torchrun('b', id, port, dir, overrides, recipe);
      bool run_directory_existed = false;
      const bool killed = kill_a_worker_of_b_when(*b, [&] {
        std::error_code ec;
        if (at_once) {
          run_directory_existed = fs::exists(runs, ec);
          return true;  // as soon as there is a worker
        }
        return has_first_epoch_checkpoint(runs);
      });
      ASSERT_TRUE(killed) << "no worker of node b to kill";
      if (at_once) {
        EXPECT_FALSE(run_directory_existed) << "the kill came after the run directory was made";
      }
      const auto started = std::chrono::steady_clock::now();
      JobEnd end = wait_for_job(*a, *b, dir, id);
      ASSERT_TRUE(end.node_a) << "the restarted job hangs\n" << end.logs;
      EXPECT_EQ(end.node_a, 0) << end.logs;
      EXPECT_EQ(end.node_b, 0) << end.logs;
      std::printf("%s: restarted and done in %.0f s\n", id.c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      if (!at_once) {
        EXPECT_THAT(end.logs, ::testing::HasSubstr("resumed from"));
      }
      // The agents stop the failed attempt's workers with SIGTERM, and kill those that are
      // still there 30 s later: every worker must have left at once, wherever it waited.
      EXPECT_THAT(end.logs, ::testing::Not(::testing::HasSubstr("forcefully exiting via 9")));
      const auto& expected = kill.job == Job::plain       ? reference
                             : kill.job == Job::gradients ? sharded_reference
                                                          : zero3_reference;
      EXPECT_EQ(max_difference(expected, final_weights(dir, id)), 0.0);
      if (std::getenv("MIXT_MULTINODE_LOGS")) std::printf("%s\n", end.logs.c_str());
    }
  }
}

}  // namespace
}  // namespace mixt
