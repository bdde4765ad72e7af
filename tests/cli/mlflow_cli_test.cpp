// The mlflow callback and `mixt mlflow-sync`, proven by a real MLflow server (SQLite store,
// artifacts served by it) and MLflow's own Python client reading back
// (tests/support/mlflow_server.py): the parameters are the resolved recipe as PyYAML reads it,
// each metric's history is metrics.jsonl's step for step, the artifacts are byte-identical, the
// status is FINISHED; a resume continues the same MLflow run. Faults (no server, a 401, the
// server killed mid-run) never cost the training its exit 0 or a line of metrics.jsonl, and
// mlflow-sync completes the history afterwards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "ranks.h"
#include "test_support.h"

namespace mixt {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

using Curves = std::map<std::string, std::vector<std::pair<std::int64_t, double>>>;

const std::string kHelper = testing::configured::source_dir() + "/tests/support/mlflow_server.py";

std::string helper(const std::string& arguments) {
  return testing::shell_quote(MIXT_PYTHON) + " " + testing::shell_quote(kHelper) + " " + arguments;
}

// A tracking server of this test's own, in a temporary directory; stopped when it goes.
class Server {
 public:
  Server() { start(""); }
  ~Server() { stop(); }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // `kind`: "" a real MLflow server, "401" the stub that refuses every request.
  explicit Server(const std::string& kind) { start(kind); }
  const std::string& uri() const { return uri_; }
  const fs::path& directory() const { return dir_.path(); }
  void stop() {
    if (uri_.empty()) return;
    (void)testing::run_command(helper("stop " + testing::shell_quote(dir_.path().string())));
    uri_.clear();
  }
  // Again on the same store (a server back after a crash), on a new port.
  void restart() { start(""); }

 private:
  void start(const std::string& kind) {
    const CommandResult served = testing::run_command(
        helper((kind == "401" ? "serve401 " : "serve ") + testing::shell_quote(dir_.path().string())));
    if (served.exit_code != 0) throw std::runtime_error("cannot start a tracking server: " + served.output);
    uri_ = "http://127.0.0.1:" + testing::read_file(dir_.path() / "port");
  }

  TempDir dir_;
  std::string uri_;
};

// The suite's server: ctest's mlflow_server fixture when it runs, else one started here.
std::string shared_server() {
  const fs::path port = fs::path(MIXT_MLFLOW_FIXTURE_DIR) / "port";
  if (fs::exists(port)) return "http://127.0.0.1:" + testing::read_file(port);
  static const auto own = std::make_unique<Server>();
  return own->uri();
}

// A name no earlier run of the suite used on the same server.
std::string experiment(const std::string& name) { return name + "-" + std::to_string(::getpid()); }

std::string recipe_with(const std::string& mlflow_entry, const std::string& more_callbacks = "") {
  return testing::kTinyRecipe + "callbacks: [" + more_callbacks + "{name: mlflow, " + mlflow_entry + "}]\n";
}

// metrics.jsonl as the callback names its figures: a step event's under train/, an epoch's
// val_* under val/, the rest under data/; counters and clock times are not metrics.
Curves expected_curves(const fs::path& run, Curves curves = {}) {
  std::istringstream lines(testing::read_file(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    const json event = json::parse(line);
    if (event["event"] != "step" && event["event"] != "epoch") continue;
    for (const auto& [key, value] : event.items()) {
      if (!value.is_number() || key == "epoch" || key == "step" || key == "epoch_step" || key == "epoch_elapsed_s" ||
          key == "elapsed_s") {
        continue;
      }
      const std::string tag = event["event"] == "step"    ? "train/" + key
                              : key.rfind("val_", 0) == 0 ? "val/" + key.substr(4)
                                                          : "data/" + key;
      curves[tag].emplace_back(event["step"].get<std::int64_t>(), value.get<double>());
    }
  }
  return curves;
}

Curves curves_of(const json& metrics) {
  Curves curves;
  for (const auto& [key, points] : metrics.items()) {
    for (const json& point : points) curves[key].emplace_back(point[0].get<std::int64_t>(), point[1].get<double>());
  }
  return curves;
}

json read_run(const std::string& uri, const std::string& run_id, const fs::path& download, const fs::path& recipe) {
  const CommandResult read =
      testing::run_command(helper("read " + uri + " " + run_id + " " + testing::shell_quote(download.string()) + " " +
                                  testing::shell_quote(recipe.string())));
  EXPECT_EQ(read.exit_code, 0) << read.output;
  return json::parse(read.output.substr(read.output.find('{')));
}

std::vector<fs::path> runs_of(const fs::path& dir) {
  std::vector<fs::path> runs;
  for (const auto& entry : fs::directory_iterator(dir / "runs/tiny")) runs.push_back(entry.path());
  std::sort(runs.begin(), runs.end());
  return runs;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every step and epoch event a whole tiny run logs: 2 epochs of 16 steps, a step event every 4.
void expect_complete_metrics(const fs::path& run, std::int64_t epochs = 2) {
  const std::string lines = testing::read_file(run / "metrics.jsonl");
  EXPECT_EQ(count(lines, "\"event\":\"step\""), static_cast<std::size_t>(4 * epochs));
  EXPECT_EQ(count(lines, "\"event\":\"epoch\""), static_cast<std::size_t>(epochs));
}

TEST(Mlflow, TheServerHoldsTheRecipeEveryMetricStepForStepTheArtifactsAndTheStatus) {
  const std::string uri = shared_server();
  TempDir dir;
  dir.write("recipe.yaml",
            recipe_with("tracking_uri: \"" + uri + "\", experiment: " + experiment("happy") +
                            ", artifacts: [recipe, best_checkpoint, safetensors, tensorboard], tags: [team=vision]",
                        "{name: best_checkpoint, monitor: val_top1}, "));
  const CommandResult run = testing::run_mixt({"run", "recipe.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("mlflow:"))) << "no warning when the server takes everything";
  const fs::path directory = runs_of(dir.path()).at(0);
  const std::string run_id = testing::read_file(directory / "mlflow_run_id");
  ASSERT_EQ(run_id.size(), 33u) << run_id;  // 32 hex digits and a newline

  const json server = read_run(uri, run_id.substr(0, 32), dir.path() / "download", directory / "recipe.yaml");
  EXPECT_EQ(server["status"], "FINISHED");
  EXPECT_EQ(server["mismatched_params"], json::array());
  EXPECT_GT(server["recipe_leaves"].get<int>(), 20);
  EXPECT_EQ(server["params"].size(), server["recipe_leaves"].get<std::size_t>());
  EXPECT_EQ(server["params"]["optimizer.lr"], "0.05");
  EXPECT_EQ(server["params"]["model.channels"], "[8, 16]");

  const Curves expected = expected_curves(directory);
  for (const char* tag :
       {"train/loss", "train/lr", "train/grad_norm", "train/samples_per_s", "val/loss", "val/top1", "val/top5"}) {
    EXPECT_EQ(expected.count(tag), 1u) << tag;
  }
  EXPECT_EQ(expected.at("train/loss").size(), 8u);
  EXPECT_EQ(curves_of(server["metrics"]), expected);

  EXPECT_EQ(server["tags"]["mixt.version"], "0.1.0");
  EXPECT_EQ(server["tags"]["mixt.world_size"], "1");
  EXPECT_EQ(server["tags"]["mixt.precision"], "fp32");
  EXPECT_FALSE(server["tags"]["mixt.commit"].get<std::string>().empty());
  EXPECT_FALSE(server["tags"]["mixt.host"].get<std::string>().empty());
  EXPECT_EQ(server["tags"]["team"], "vision");
  EXPECT_EQ(server["tags"]["mlflow.runName"], "tiny-" + directory.filename().string());

  // Each artifact byte for byte as the run directory has it.
  const fs::path best = fs::canonical(directory / "checkpoints/best");
  std::vector<std::string> tensorboard;
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (entry.path().filename().string().rfind("events.out.tfevents", 0) == 0) {
      tensorboard.push_back("tensorboard/" + entry.path().filename().string());
    }
  }
  ASSERT_EQ(tensorboard.size(), 1u);
  std::vector<std::string> names = {"checkpoints/" + best.filename().string(), "model.safetensors", "recipe.yaml",
                                    tensorboard[0]};
  std::sort(names.begin(), names.end());
  EXPECT_EQ(server["artifacts"].get<std::vector<std::string>>(), names);
  const fs::path downloaded = server["artifact_dir"].get<std::string>();
  const std::map<std::string, fs::path> local = {{names[0], best},
                                                 {"model.safetensors", directory / "model.safetensors"},
                                                 {"recipe.yaml", directory / "recipe.yaml"},
                                                 {tensorboard[0], directory / tensorboard[0].substr(12)}};
  for (const auto& [name, file] : local) {
    const std::string ours = testing::read_file(file);
    EXPECT_FALSE(ours.empty()) << name;
    EXPECT_TRUE(testing::read_file(downloaded / name) == ours) << name << " differs from " << file;
  }
}

TEST(Mlflow, AResumedRunContinuesTheSameMlflowRun) {
  const std::string uri = shared_server();
  const std::string name = experiment("resume");
  TempDir dir;
  dir.write("recipe.yaml", recipe_with("tracking_uri: \"" + uri + "\", experiment: " + name));
  const CommandResult first = testing::run_mixt({"run", "recipe.yaml", "trainer.epochs=1"}, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path one = runs_of(dir.path()).at(0);
  const CommandResult second =
      testing::run_mixt({"run", "recipe.yaml", "trainer.epochs=2", "trainer.resume=" + one.string()}, dir.path());
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const fs::path two = runs_of(dir.path()).at(1);
  const std::string run_id = testing::read_file(one / "mlflow_run_id");
  EXPECT_EQ(testing::read_file(two / "mlflow_run_id"), run_id);  // from the checkpoint's callback state

  const CommandResult runs = testing::run_command(helper("runs " + uri + " " + name));
  ASSERT_EQ(runs.exit_code, 0) << runs.output;
  EXPECT_EQ(json::parse(runs.output).size(), 1u) << runs.output;

  const json server = read_run(uri, run_id.substr(0, 32), dir.path() / "download", one / "recipe.yaml");
  EXPECT_EQ(server["status"], "FINISHED");
  EXPECT_EQ(server["mismatched_params"], json::array());  // the first run's recipe; parameters never change
  EXPECT_THAT(server["tags"]["mixt.resumed_with"].get<std::string>(), HasSubstr("trainer.epochs: 1 -> 2"));
  // One history: the first directory's steps 4..16, then the second's 20..32.
  EXPECT_EQ(curves_of(server["metrics"]), expected_curves(two, expected_curves(one)));
  EXPECT_EQ(curves_of(server["metrics"]).at("train/loss").back().first, 32);
}

// Two ranks under torchrun's environment: only rank 0 talks to the server, so the experiment
// holds one run, whose history is the run directory's metrics.jsonl (rank 0 writes it).
TEST(Mlflow, TwoRanksMakeOneRun) {
  const std::string uri = shared_server();
  const std::string name = experiment("ranks");
  TempDir dir;
  dir.write("r.yaml", recipe_with("tracking_uri: \"" + uri + "\", experiment: " + name));
  const std::vector<testing::RankResult> ranks = testing::run_ranks(dir, 2, {{}});
  for (const auto& rank : ranks) ASSERT_EQ(rank.exit_code, std::optional<int>(0)) << rank.log;
  const CommandResult listed = testing::run_command(helper("runs " + uri + " " + name));
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const json ids = json::parse(listed.output.substr(listed.output.find('[')));
  ASSERT_EQ(ids.size(), 1u) << ids;
  const fs::path directory = runs_of(dir.path()).at(0);
  EXPECT_EQ(testing::read_file(directory / "mlflow_run_id").substr(0, 32), ids[0].get<std::string>());
  const json server = read_run(uri, ids[0].get<std::string>(), dir.path() / "download", directory / "recipe.yaml");
  EXPECT_EQ(server["status"], "FINISHED");
  EXPECT_EQ(curves_of(server["metrics"]), expected_curves(directory));
}

TEST(Mlflow, AFailedRunEndsFailedWithWhatItLogged) {
  const std::string uri = shared_server();
  TempDir dir;
  dir.write("recipe.yaml", recipe_with("tracking_uri: \"" + uri + "\", experiment: " + experiment("failed")));
  // A learning rate that makes the loss NaN at once: mixt stops with exit 1.
  const CommandResult run = testing::run_mixt({"run", "recipe.yaml", "optimizer.lr=1e12"}, dir.path());
  ASSERT_EQ(run.exit_code, 1) << run.output;
  const fs::path directory = runs_of(dir.path()).at(0);
  EXPECT_EQ(testing::read_file(directory / "mlflow_status"), "FAILED\n");
  const std::string run_id = testing::read_file(directory / "mlflow_run_id").substr(0, 32);
  const json server = read_run(uri, run_id, dir.path() / "download", directory / "recipe.yaml");
  EXPECT_EQ(server["status"], "FAILED");
  EXPECT_EQ(curves_of(server["metrics"]), expected_curves(directory));  // NaN is null in metrics.jsonl: not sent
}

TEST(Mlflow, NoServerAtTheAddressIsOneWarningAndTheTrainingEndsWell) {
  TempDir dir;
  // A port nothing listens on: the one a server just gave back.
  Server gone("401");
  const std::string uri = gone.uri();
  gone.stop();
  dir.write("recipe.yaml", recipe_with("tracking_uri: \"" + uri + "\", flush_timeout_s: 1"));
  const auto started = std::chrono::steady_clock::now();
  const CommandResult run = testing::run_mixt({"run", "recipe.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60));
  EXPECT_EQ(count(run.output, "mlflow: cannot reach " + uri), 1u) << run.output;
  EXPECT_THAT(run.output, HasSubstr("mlflow: not sent to " + uri));
  EXPECT_THAT(run.output, HasSubstr("mixt mlflow-sync"));
  const fs::path directory = runs_of(dir.path()).at(0);
  expect_complete_metrics(directory);
  EXPECT_EQ(testing::read_file(directory / "mlflow_status"), "FINISHED\n");

  // Not an http(s) address: said at the start, and the run goes on.
  dir.write("recipe.yaml", recipe_with("tracking_uri: \"localhost:5000\""));
  const CommandResult scheme = testing::run_mixt({"run", "recipe.yaml", "trainer.epochs=1"}, dir.path());
  ASSERT_EQ(scheme.exit_code, 0) << scheme.output;
  EXPECT_THAT(scheme.output, HasSubstr("mlflow: tracking URI 'localhost:5000' is not http:// or https://"));

  // A recipe mistake is a recipe error (exit 2), at its place.
  dir.write("recipe.yaml", recipe_with("tracking_uri: \"" + uri + "\", artifacts: [recipe, weights]"));
  const CommandResult wrong = testing::run_mixt({"run", "recipe.yaml"}, dir.path());
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_THAT(wrong.output, HasSubstr("recipe.yaml:10:"));
  EXPECT_THAT(wrong.output, HasSubstr("unknown artifact 'weights'"));
}

TEST(Mlflow, AServerThatRefusesTheCredentialsIsOneWarningAndTheTokenIsNeverShown) {
  Server refusing("401");
  TempDir dir;
  dir.write("recipe.yaml", recipe_with("tracking_uri: \"" + refusing.uri() + "\", flush_timeout_s: 1"));
  const CommandResult run =
      testing::run_mixt({"run", "recipe.yaml"}, dir.path(), "MLFLOW_TRACKING_TOKEN=s3cret-token-value");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(count(run.output, "refused mixt's credentials"), 1u) << run.output;
  EXPECT_THAT(run.output, HasSubstr("HTTP 401: credentials required"));
  const fs::path directory = runs_of(dir.path()).at(0);
  expect_complete_metrics(directory);
  // The token went to the server, and nowhere else.
  EXPECT_THAT(testing::read_file(refusing.directory() / "requests.log"), HasSubstr("Bearer s3cret-token-value"));
  EXPECT_THAT(run.output, Not(HasSubstr("s3cret")));
  EXPECT_THAT(testing::read_file(directory / "log.txt"), Not(HasSubstr("s3cret")));
  EXPECT_THAT(testing::read_file(directory / "recipe.yaml"), Not(HasSubstr("s3cret")));
}

TEST(Mlflow, AServerKilledMidRunIsCaughtUpByMlflowSync) {
  Server server;
  TempDir dir;
  const std::string recipe = recipe_with("tracking_uri: \"" + server.uri() + "\", flush_timeout_s: 2");
  dir.write("recipe.yaml", testing::replace_once(recipe, "epochs: 2", "epochs: 12"));
  const std::string mixt = testing::shell_quote(testing::configured::mixt_executable());
  ASSERT_EQ(testing::run_command("cd " + testing::shell_quote(dir.path().string()) + " && (" + mixt +
                                 " run recipe.yaml > out.txt 2>&1; echo $? > rc) > /dev/null 2>&1 &")
                .exit_code,
            0);
  // Killed once the MLflow run exists and some steps are in: the rest of the run goes on without it.
  fs::path directory;
  for (int i = 0; i < 1200 && directory.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!fs::exists(dir.path() / "runs/tiny")) continue;
    const fs::path run = runs_of(dir.path()).at(0);
    if (fs::exists(run / "mlflow_run_id") && count(testing::read_file(run / "metrics.jsonl"), "\n") >= 2) {
      directory = run;
    }
  }
  ASSERT_FALSE(directory.empty()) << testing::read_file(dir.path() / "out.txt");
  server.stop();
  for (int i = 0; i < 1200 && !fs::exists(dir.path() / "rc"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string output = testing::read_file(dir.path() / "out.txt");
  ASSERT_EQ(testing::read_file(dir.path() / "rc"), "0\n") << output;
  ASSERT_THAT(output, HasSubstr("epoch 12/12")) << "the server went down before the run ended";
  EXPECT_THAT(output, HasSubstr("mlflow: not sent to " + server.uri()));
  EXPECT_THAT(output, HasSubstr("mixt mlflow-sync " + directory.string()));
  expect_complete_metrics(directory, 12);

  server.restart();  // the same store, another port
  const CommandResult sync =
      testing::run_mixt({"mlflow-sync", directory.string(), "--tracking-uri", server.uri()}, dir.path());
  ASSERT_EQ(sync.exit_code, 0) << sync.output;
  EXPECT_THAT(sync.output, HasSubstr("status FINISHED"));
  const std::string run_id = testing::read_file(directory / "mlflow_run_id").substr(0, 32);
  json read = read_run(server.uri(), run_id, dir.path() / "download", directory / "recipe.yaml");
  EXPECT_EQ(read["status"], "FINISHED");
  EXPECT_EQ(curves_of(read["metrics"]), expected_curves(directory));
  EXPECT_EQ(read["artifacts"], json::array({"recipe.yaml"}));

  // Again: nothing new to send, nothing doubled.
  const CommandResult again =
      testing::run_mixt({"mlflow-sync", directory.string(), "--tracking-uri", server.uri()}, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("0 metric values sent"));
  read = read_run(server.uri(), run_id, dir.path() / "download2", directory / "recipe.yaml");
  EXPECT_EQ(curves_of(read["metrics"]), expected_curves(directory));

  // Not a run directory: a usage error.
  const CommandResult not_a_run = testing::run_mixt({"mlflow-sync", dir.path().string()}, dir.path());
  EXPECT_EQ(not_a_run.exit_code, 2) << not_a_run.output;
  EXPECT_THAT(not_a_run.output, HasSubstr("is not a run directory (no metrics.jsonl)"));
}

}  // namespace
}  // namespace mixt
