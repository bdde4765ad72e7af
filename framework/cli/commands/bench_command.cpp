#include "commands/bench_command.h"

#include <ATen/DeviceAccelerator.h>
#include <CLI/CLI.hpp>
#include <c10/core/Event.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/closest_match.h"
#include "common/container_image.h"
#include "common/host_allocator.h"
#include "common/interrupt.h"
#include "common/run_directory.h"
#include "experiment/experiment.h"
#include "experiment/session.h"
#include "mixt/version.h"

namespace mixt::cli {

namespace {

using nlohmann::json;

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const auto above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (position - static_cast<double>(below));
}

// Times the gaps between consecutive steps: CUDA events recorded on the stream (no host
// synchronisation inside the loop) on a GPU, the wall clock on the CPU (where every op
// has finished when it returns).
class StepTimer {
 public:
  explicit StepTimer(at::Device device) : device_(device) {}
  void mark() {
    if (device_.is_cuda()) {
      events_.emplace_back(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
      events_.back().record(at::accelerator::getCurrentStream(device_.index()));
    } else {
      clock_.push_back(std::chrono::steady_clock::now());
    }
  }
  // Milliseconds of each step, after synchronising once at the end.
  std::vector<double> step_ms() {
    std::vector<double> out;
    if (device_.is_cuda()) {
      at::accelerator::synchronizeDevice(device_.index());
      for (std::size_t i = 1; i < events_.size(); ++i) out.push_back(events_[i - 1].elapsedTime(events_[i]));
    } else {
      for (std::size_t i = 1; i < clock_.size(); ++i) {
        out.push_back(std::chrono::duration<double, std::milli>(clock_[i] - clock_[i - 1]).count());
      }
    }
    return out;
  }

 private:
  at::Device device_;
  std::vector<c10::Event> events_;
  std::vector<std::chrono::steady_clock::time_point> clock_;
};

// mixt bench's view of the loop: a mark when training starts and after every step; the
// last step's loss, read once at the end.
struct StepTimerCallback final : Callback {
  explicit StepTimerCallback(at::Device device) : timer(device) {}
  void on_fit_start(const FitStart&) override { timer.mark(); }
  void on_step_end(const StepEnd& step) override {
    timer.mark();
    last_loss = step.loss;
  }
  StepTimer timer;
  at::Tensor last_loss;
};

std::string recipe_policy(const Recipe& recipe) {
  return recipe.config().section("precision").string("name", "");
}

// A misspelt --precision fails here, with the known names, before any policy has run
// (each worker would find it too, but only after the policies before it).
void check_policies_exist(const Recipe& recipe, const std::vector<std::string>& policies) {
  Session session;
  session.load_plugins_of(recipe);
  const Registry& registry = session.registry();
  const std::vector<std::string> known = registry.names(ComponentKind::precision);
  for (const auto& policy : policies) {
    if (registry.find(ComponentKind::precision, policy) == nullptr) {
      throw usage_error("--precision: unknown precision '" + policy + "'",
                        suggestion_hint(policy, known, "known precisions"));
    }
  }
}

json interrupted_row(const std::string& policy) { return {{"policy", policy}, {"error", "interrupted"}}; }

// The command line of `mixt bench-worker` for one policy.
std::vector<std::string> worker_arguments(const BenchOptions& options, const std::string& policy,
                                          const std::string& checkpointing) {
  std::vector<std::string> args = {"/proc/self/exe", "bench-worker", options.recipe, "--precision", policy,
                                   "--steps", std::to_string(options.steps), "--warmup",
                                   std::to_string(options.warmup)};
  if (options.batch) args.insert(args.end(), {"--batch", std::to_string(*options.batch)});
  args.insert(args.end(), options.overrides.begin(), options.overrides.end());
  if (!checkpointing.empty()) args.push_back("trainer.activation_checkpointing=" + checkpointing);
  return args;
}

// In the forked child: the worker, its stdout the pipe's write end; it never returns.
[[noreturn]] void exec_worker(std::vector<std::string>& args, const int pipe_fds[2], pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(130);  // the parent died before prctl
  ::dup2(pipe_fds[1], STDOUT_FILENO);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  ::_exit(127);
}

// All the worker writes to the pipe, until it closes; an interrupt meanwhile is passed on
// to the worker (once).
std::string read_worker_output(int fd, pid_t child) {
  std::string output;
  char buffer[4096];
  bool forwarded = false;
  for (pollfd readable{fd, POLLIN, 0};;) {
    // A signal interrupts poll (never restarted), and the timeout bounds a missed one.
    if (interrupt_requested() && !forwarded) {
      ::kill(child, SIGINT);
      forwarded = true;
    }
    if (::poll(&readable, 1, 200) <= 0) continue;
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    output.append(buffer, static_cast<std::size_t>(got));
  }
  return output;
}

// The worker's exit code, 128 + the signal for one a signal ended.
int wait_for_exit(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Where the worker's JSON line starts: the last opening brace of its output.
constexpr char kJsonLineStart = '{';

// The worker's row: the last JSON line of its output, or an error record.
json worker_row(const std::string& policy, int code, const std::string& output) {
  const auto last_line = output.find_last_of(kJsonLineStart);
  if (code != 0 || last_line == std::string::npos) {
    return {{"policy", policy}, {"error", "failed (exit " + std::to_string(code) + ")"}};
  }
  try {
    return json::parse(output.substr(last_line));
  } catch (const std::exception&) {
    return {{"policy", policy}, {"error", "unreadable worker output"}};
  }
}

// Runs `mixt bench-worker` for one policy; returns its JSON line (or an error record).
// An interrupt of `mixt bench` stops the worker too: a terminal's Ctrl-C reaches both, a
// signal to `mixt bench` alone (kill, a job scheduler) is passed on, and a worker whose
// parent died gets SIGTERM.
json run_worker(const BenchOptions& options, const std::string& policy, const std::string& checkpointing) {
  if (interrupt_requested()) return interrupted_row(policy);
  std::vector<std::string> args = worker_arguments(options, policy, checkpointing);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {{"policy", policy}, {"error", "cannot create a pipe"}};
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) exec_worker(args, pipe_fds, parent);
  ::close(pipe_fds[1]);
  const std::string output = read_worker_output(pipe_fds[0], child);
  ::close(pipe_fds[0]);
  const int code = wait_for_exit(child);
  if (interrupt_requested() || code == 130) return interrupted_row(policy);
  return worker_row(policy, code, output);
}

std::string format(const char* pattern, double value) {
  if (!std::isfinite(value)) return "-";
  char text[64];
  std::snprintf(text, sizeof(text), pattern, value);
  return text;
}

// A figure of a worker's JSON line: JSON has no NaN or inf, so nlohmann writes them (a
// non-finite loss, a rate with no timed step) as null, which reads back as NaN here.
double figure(const json& row, const char* key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : NAN;
}

// With --activation-checkpointing, a column says which setting each row ran with; for a
// task that counts several predictions per sample (rows with a unit: tokens) one gives them per second.
std::string markdown_table(const std::vector<json>& rows, bool checkpointing_column) {
  std::string unit;
  for (const auto& r : rows) {
    if (r.contains("unit")) unit = r["unit"].get<std::string>();
  }
  const bool unit_column = !unit.empty();
  const std::string rate_key = unit + "_per_s";
  std::ostringstream out;
  out << "| policy" << (checkpointing_column ? " | activation checkpointing" : "")
      << (unit_column ? " | " + unit + "/s" : "")
      << " | images/s | step p50 (ms) | step p95 (ms) | peak memory (MiB) | loss | skipped | note |\n"
      << "|---" << (checkpointing_column ? "|---" : "") << (unit_column ? "|---:" : "")
      << "|---:|---:|---:|---:|---:|---:|---|\n";
  for (const auto& r : rows) {
    const std::string first =
        r["policy"].get<std::string>() +
        (checkpointing_column ? " | " + r.value("activation_checkpointing", std::string("-")) : std::string());
    if (r.contains("error")) {
      out << "| " << first << (unit_column ? " | -" : "") << " | - | - | - | - | - | - | "
          << r["error"].get<std::string>() << " |\n";
      continue;
    }
    std::string note = r["memory_kind"].get<std::string>();
    if (!r["loss_finite"].get<bool>()) note = "NON-FINITE LOSS: numbers not meaningful; " + note;
    out << "| " << first << (unit_column ? " | " + format("%.0f", figure(r, rate_key.c_str())) : "") << " | "
        << format("%.1f", figure(r, "images_per_s")) << " | " << format("%.2f", figure(r, "step_ms_p50")) << " | "
        << format("%.2f", figure(r, "step_ms_p95")) << " | " << format("%.0f", figure(r, "peak_memory_mib")) << " | "
        << format("%.4f", figure(r, "loss")) << " | " << r["skipped_steps"].get<std::int64_t>() << " | " << note
        << " |\n";
  }
  return out.str();
}

// The workers' speed notes (an emulated bfloat16, a slow float16), each once: what the
// table's figures mean on this machine, under the table as on start-up.
std::string speed_notes(const std::vector<json>& rows) {
  std::string notes;
  for (const auto& r : rows) {
    const std::string note = r.value("speed_note", "");
    if (!note.empty() && notes.find(note) == std::string::npos) notes += "note: " + note + "\n";
  }
  return notes;
}

}  // namespace

namespace {

// The recipe's overrides for one policy's run: one epoch of warmup + steps batches, no
// validation, no resume, no logging.
std::vector<std::string> worker_overrides(const BenchOptions& options, const std::string& policy,
                                          const std::string& recipe_policy) {
  std::vector<std::string> overrides = options.overrides;
  // Keep the recipe's policy options when benchmarking its own policy; otherwise the
  // policy runs with its defaults (other policies' options would be unknown keys).
  if (policy != recipe_policy) overrides.push_back("precision={name: " + policy + "}");
  // A non-finite loss is reported in the table (NON-FINITE LOSS), not a reason to lose the row.
  overrides.insert(overrides.end(), {"data.val=null", "trainer.epochs=1", "trainer.resume=\"\"",
                                     "trainer.log_every=1000000000", "trainer.stop_on_nonfinite_loss=false",
                                     "trainer.max_steps_per_epoch=" + std::to_string(options.warmup + options.steps)});
  if (options.batch) overrides.push_back("data.train.batch_size=" + std::to_string(*options.batch));
  return overrides;
}

void check_enough_batches(std::int64_t available, const BenchOptions& options) {
  if (available < options.warmup + options.steps) {
    throw usage_error("the training data has " + std::to_string(available) +
                          " batches per epoch; the benchmark needs " + std::to_string(options.warmup + options.steps),
                      "lower --steps/--warmup, or use more (or synthetic) data");
  }
}

struct PeakMemory {
  double mib = 0;
  std::string kind;
};

PeakMemory peak_memory(at::Device device) {
  PeakMemory peak;
  if (device.is_cuda()) {
    const auto stats = at::accelerator::getDeviceStats(device.index());
    peak.mib = static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
    peak.kind = "CUDA caching-allocator peak";
  } else {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    peak.mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
    peak.kind = "process peak RSS, " + host_allocator().setting + " host allocator";
  }
  return peak;
}

// The worker's JSON line, from the run's result and the step times after the warmup.
json worker_line(const std::string& policy, const Experiment& e, const BenchOptions& options, const TrainResult& result,
                 const StepTimerCallback& timer, const std::vector<double>& timed) {
  const at::Device device = e.facts.device;
  const std::int64_t batch_size = result.optimizer_steps > 0 ? result.samples / result.optimizer_steps : 0;
  double total_ms = 0;
  for (double ms : timed) total_ms += ms;
  const PeakMemory peak = peak_memory(device);
  const std::int64_t skipped = result.skipped_steps;
  const double loss = timer.last_loss.defined() ? timer.last_loss.item<double>() : NAN;
  const double samples_per_s = total_ms > 0 ? 1000.0 * static_cast<double>(batch_size * timed.size()) / total_ms : NAN;
  json line = {{"policy", policy},
          {"device", device.str()},
          {"batch", batch_size},
          {"steps", static_cast<std::int64_t>(timed.size())},
          {"warmup", options.warmup},
          {"images_per_s", samples_per_s},
          {"step_ms_p50", percentile(timed, 0.5)},
          {"step_ms_p95", percentile(timed, 0.95)},
          {"peak_memory_mib", peak.mib},
          {"memory_kind", peak.kind},
          {"loss", loss},
          {"loss_finite", std::isfinite(loss)},
          {"skipped_steps", skipped},
          {"speed_note", e.facts.speed_note}};
  // A task whose samples hold several predictions (a window's tokens) counts them too.
  if (const auto unit = e.components.task->throughput(e.components.train->sample_shape())) {
    line[unit->unit + "_per_s"] = samples_per_s * static_cast<double>(unit->per_sample);
    line["unit"] = unit->unit;
  }
  return line;
}

}  // namespace

int bench_worker(const BenchOptions& options) {
  const Recipe recipe = load_recipe(options.recipe, options.overrides);
  const std::string policy = options.policies.at(0);
  const std::vector<std::string> overrides = worker_overrides(options, policy, recipe_policy(recipe));

  Session session;
  Experiment e = session.prepare(options.recipe, overrides);
  check_enough_batches(e.components.train->batches_per_epoch(), options);
  const at::Device device = e.facts.device;
  if (device.is_cuda()) at::accelerator::resetPeakStats(device.index());

  Progress quiet(false, 1, /*quiet=*/true);
  Trainer trainer(e.components, e.facts, e.options, nullptr, quiet);
  auto timer = std::make_shared<StepTimerCallback>(device);
  trainer.add_callback(timer, "bench_timer");
  const TrainResult result = trainer.fit();

  std::vector<double> all = timer->timer.step_ms();
  const std::vector<double> timed(all.begin() + std::min<std::size_t>(all.size(), options.warmup), all.end());
  const json line = worker_line(policy, e, options, result, *timer, timed);
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

namespace {
// What a benchmark figure is worth nothing without: which mixt, which LibTorch, which
// machine, when. (A GPU's name is in each row's device; bench/gpu/ records nvidia-smi.)
json bench_environment() {
  char host[256] = "";
  ::gethostname(host, sizeof(host) - 1);
  std::string cpu;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; cpu.empty() && std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) cpu = line.substr(line.find(':') + 2);
  }
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &utc);
  json environment = {{"mixt", version()},
                      {"libtorch", TORCH_VERSION},
                      {"build", build_fingerprint()},
                      {"date", date},
                      {"host", host},
                      {"cpu", cpu},
                      {"cpu_cores", ::sysconf(_SC_NPROCESSORS_ONLN)},
                      {"host_allocator", host_allocator().summary()}};
  if (const std::string image = container_image(); !image.empty()) environment["container_image"] = image;
  return environment;
}
}  // namespace

std::vector<std::string> split_checkpointing_settings(const std::string& text) {
  std::vector<std::string> settings;
  std::string current;
  int depth = 0;
  const auto flush = [&] {
    const auto first = current.find_first_not_of(' ');
    if (first != std::string::npos) settings.push_back(current.substr(first, current.find_last_not_of(' ') - first + 1));
    current.clear();
  };
  for (const char ch : text) {
    if (ch == ',' && depth == 0) {
      flush();
      continue;
    }
    depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
    current += ch;
  }
  flush();
  return settings;
}

int bench(const BenchOptions& options) {
  const Recipe recipe = load_recipe(options.recipe, options.overrides);
  const Config root = recipe.config();
  const std::string name = root.string("name", std::filesystem::path(options.recipe).stem().string());
  const std::string output = kRecipeOutput.read(root);
  std::vector<std::string> policies = options.policies;
  if (policies.empty()) policies.push_back(recipe_policy(recipe));
  if (options.steps < 1 || options.warmup < 0) throw usage_error("--steps must be at least 1 and --warmup at least 0");
  // Leaving --batch out means the recipe's batch size; 0 or less is a mistake, not that.
  if (options.batch && *options.batch < 1) {
    throw usage_error("--batch must be at least 1, got " + std::to_string(*options.batch),
                      "leave --batch out to use the recipe's data.train.batch_size");
  }
  check_policies_exist(recipe, policies);

  // Ctrl-C stops the policy running and the ones after it; the finished rows are kept.
  install_interrupt_handlers("mixt bench: stopping; the rows that finished are kept (again to quit at once)");
  std::vector<json> rows;
  bool failed = false;
  // The recipe's own setting when --activation-checkpointing is not given.
  const std::vector<std::string> checkpointing =
      options.checkpointing.empty() ? std::vector<std::string>{""} : options.checkpointing;
  for (const auto& policy : policies) {
    for (const auto& setting : checkpointing) {
      if (interrupt_requested()) break;
      std::fprintf(stderr, "mixt bench: %s%s ...\n", policy.c_str(),
                   setting.empty() ? "" : (", activation checkpointing " + setting).c_str());
      rows.push_back(run_worker(options, policy, setting));
      if (!setting.empty()) rows.back()["activation_checkpointing"] = setting;
      failed = failed || rows.back().contains("error");
    }
  }
  const std::string table = markdown_table(rows, !options.checkpointing.empty());
  const std::string notes = speed_notes(rows);
  RunDirectory run(output, name + "-bench");
  const json environment = bench_environment();
  json report = {{"recipe", options.recipe}, {"steps", options.steps}, {"warmup", options.warmup},
                 {"overrides", options.overrides}, {"environment", environment}, {"results", rows}};
  run.write_text("bench.json", report.dump(2) + "\n");
  run.write_text("bench.md", "# mixt bench " + options.recipe + "\n\nmixt " + version() + ", LibTorch " +
                                 TORCH_VERSION + ", " + environment["cpu"].get<std::string>() + " (" +
                                 std::to_string(environment["cpu_cores"].get<long>()) + " cores), " +
                                 environment["date"].get<std::string>() + ", host allocator " +
                                 environment["host_allocator"].get<std::string>() + "\n\n" + table +
                                 (notes.empty() ? "" : "\n" + notes));
  std::printf("%s%s\nwritten to %s\n", table.c_str(), notes.empty() ? "" : ("\n" + notes).c_str(),
              run.path().string().c_str());
  if (interrupt_requested()) {
    std::fflush(stdout);
    std::fprintf(stderr, "mixt bench: interrupted; the table holds the policies that finished\n");
    return 130;
  }
  return failed ? 1 : 0;
}

namespace {

std::string trim_spaces(const std::string& text) {
  const std::size_t first = text.find_first_not_of(' ');
  return first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// The flags as given, before they become BenchOptions.
struct BenchArguments {
  BenchOptions options;
  std::string policies;
  std::int64_t batch = 0;
  std::string checkpointing;
};

// --precision "fp32, amp_bf16" as a shell user quotes it, --batch when given, and the rows
// of --activation-checkpointing.
BenchOptions bench_options(BenchArguments& args, const CLI::App& command) {
  BenchOptions options = args.options;
  std::stringstream list(args.policies);
  for (std::string policy; std::getline(list, policy, ',');) {
    policy = trim_spaces(policy);
    if (!policy.empty()) options.policies.push_back(policy);
  }
  if (command.count("--batch") > 0) options.batch = args.batch;
  options.checkpointing = split_checkpointing_settings(args.checkpointing);
  return options;
}

}  // namespace

void add_bench_commands(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<BenchArguments>();
  BenchOptions& o = args->options;
  CLI::App* bench_app = app.add_subcommand("bench", "time a recipe under several precision policies, one table");
  bench_app->add_option("recipe", o.recipe, "recipe YAML file")->required();
  bench_app->add_option("--precision", args->policies, "comma-separated policies, e.g. fp32,tf32,amp_fp16,amp_bf16");
  bench_app->add_option("--steps", o.steps, "timed optimizer steps per policy")->capture_default_str();
  bench_app->add_option("--warmup", o.warmup, "untimed steps first")->capture_default_str();
  bench_app->add_option("--batch", args->batch, "batch size (default: the recipe's)");
  bench_app->add_option("--activation-checkpointing", args->checkpointing,
                        "rows per setting of trainer.activation_checkpointing, e.g. none,all or none,[layer1,layer2]");
  bench_app->add_option("overrides", o.overrides, "key=value overrides");
  commands.push_back({bench_app, [args, bench_app] { return bench(bench_options(*args, *bench_app)); }});
  // One policy in a process of its own; `mixt bench` runs it.
  CLI::App* worker = app.add_subcommand("bench-worker", "")->group("");
  worker->add_option("recipe", o.recipe)->required();
  worker->add_option("--precision", args->policies)->required();
  worker->add_option("--steps", o.steps);
  worker->add_option("--warmup", o.warmup);
  worker->add_option("--batch", args->batch);
  worker->add_option("overrides", o.overrides);
  commands.push_back({worker, [args, worker] { return bench_worker(bench_options(*args, *worker)); }});
}

}  // namespace mixt::cli
