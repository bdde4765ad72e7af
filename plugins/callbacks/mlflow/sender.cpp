#include "sender.h"

#include <mixt/error.h>

#include <algorithm>
#include <set>

namespace mixt::mlflow {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {
constexpr milliseconds kPoll{2000};             // metrics.jsonl is looked at this often anyway
constexpr milliseconds kFirstBackoff{500};      // then doubled at each failure ...
constexpr milliseconds kLongestBackoff{30000};  // ... up to this
constexpr std::size_t kBatch = 1000;            // metric points in memory at most: one log-batch
}  // namespace

Sender::Sender(SenderSetup setup)
    : setup_(std::move(setup)), client_(setup_.tracking_uri, setup_.request_timeout), run_(client_) {
  thread_ = std::thread([this] { loop(); });
}

Sender::~Sender() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finishing_ = finish_requested_ = true;  // no status: finish() was not called
    deadline_ = Clock::now();
  }
  wake_.notify_all();
  thread_.join();
}

void Sender::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  wake_.notify_all();
}

std::string Sender::run_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return run_id_;
}

std::string Sender::finish(const std::string& status, std::vector<Artifact> artifacts, milliseconds deadline) {
  // Kept beside metrics.jsonl, so `mixt mlflow-sync` can send it when the server could not take it now.
  write_line(setup_.run_directory / kStatusFile, status);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finishing_ = finish_requested_ = true;
    status_ = status;
    artifacts_ = std::move(artifacts);
    deadline_ = Clock::now() + deadline;
  }
  wake_.notify_all();
  thread_.join();
  return unsent();
}

void Sender::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const milliseconds wait = backoff_.count() > 0 ? backoff_ : kPoll;
    auto until = Clock::now() + wait;
    if (finishing_) until = std::min(until, deadline_);
    // A wake-up while backing off waits for the backoff; finish() is answered at once.
    wake_.wait_until(lock, until, [&] { return finish_requested_ || (woken_ && backoff_.count() == 0); });
    const bool finishing = finishing_;
    if (finishing && !finish_requested_ && Clock::now() >= deadline_) break;
    if (finishing && status_.empty() && artifacts_.empty() && Clock::now() >= deadline_) break;  // destructor
    finish_requested_ = woken_ = false;
    if (gave_up_) {
      if (finishing) break;
      continue;
    }
    lock.unlock();
    const Outcome outcome = send_some(finishing);
    lock.lock();
    if (outcome == Outcome::sent) {
      backoff_ = milliseconds(0);
      if (finishing) break;
    } else if (outcome == Outcome::retry) {
      backoff_ = backoff_.count() == 0 ? kFirstBackoff : std::min(backoff_ * 2, kLongestBackoff);
    } else {
      gave_up_ = true;
      if (finishing) break;
    }
  }
}

Sender::Outcome Sender::failed(const std::string& what, const Reply& reply) {
  last_error_ = what + ": " + reply.error;
  if (reply.unauthorized()) {
    warn("mlflow: " + setup_.tracking_uri + " refused mixt's credentials while " + what + " (" + reply.error +
         "); nothing more is sent to it, training goes on, metrics.jsonl keeps every figure");
    return Outcome::give_up;
  }
  if (reply.transient()) {
    if (!warned_unreachable_) {
      warned_unreachable_ = true;
      warn("mlflow: cannot reach " + setup_.tracking_uri + " (" + what + ": " + reply.error +
           "); training goes on, metrics.jsonl keeps every figure and they are retried in the background");
    }
    return Outcome::retry;
  }
  if (!run_ready_) {  // the run itself refused (a bad experiment name): nothing can be sent
    warn("mlflow: " + setup_.tracking_uri + " refused " + what + " (" + reply.error +
         "); nothing is sent to it, training goes on");
    return Outcome::give_up;
  }
  if (!warned_refused_) {
    warned_refused_ = true;
    warn("mlflow: " + setup_.tracking_uri + " refused " + what + " (" + reply.error + "); that part is skipped");
  }
  return Outcome::sent;  // skipped: the rest goes on
}

Sender::Outcome Sender::set_up_run() {
  if (!setup_.run_id.empty()) {
    const Reply opened = run_.open(setup_.run_id);
    if (opened.ok()) {
      if (run_.status() != "RUNNING") {
        if (const Reply running = run_.set_status("RUNNING"); !running.ok())
          return failed("reopening the run", running);
      }
    } else if (opened.status == 404) {
      warn("mlflow: the run " + setup_.run_id + " this training continues is not on " + setup_.tracking_uri +
           " (deleted?); a new MLflow run starts");
      setup_.run_id.clear();
    } else {
      return failed("opening run " + setup_.run_id, opened);
    }
  }
  if (setup_.run_id.empty()) {
    const Reply created = run_.create(setup_.experiment, setup_.run_name, setup_.tags);
    if (!created.ok()) return failed("creating the run in experiment '" + setup_.experiment + "'", created);
  }
  write_line(setup_.run_directory / kRunIdFile, run_.id());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    run_id_ = run_.id();
  }
  run_ready_ = true;
  return Outcome::sent;
}

Sender::Outcome Sender::send_some(bool finishing) {
  if (!run_ready_) {
    if (const Outcome set_up = set_up_run(); set_up != Outcome::sent || !run_ready_) return set_up;
  }
  if (!params_sent_) {
    std::vector<std::string> changed;
    const Reply logged = run_.log_params(setup_.params, &changed);
    if (!logged.ok()) {
      if (const Outcome outcome = failed("logging the recipe's parameters", logged); outcome != Outcome::sent) {
        return outcome;
      }
    }
    if (!changed.empty()) {  // a resume with other values: parameters cannot change, a tag says so
      std::string text;
      for (const std::string& line : changed) text += (text.empty() ? "" : "; ") + line;
      run_.set_tag("mixt.resumed_with", text);
    }
    params_sent_ = true;
  }
  while (true) {
    if (pending_.empty()) {
      pending_ = read_metrics(setup_.run_directory / "metrics.jsonl", offset_, kBatch);
      pending_timestamp_ = now_ms();
      if (pending_.empty()) break;
    }
    const Reply logged = run_.log_metrics(pending_, pending_timestamp_);
    if (!logged.ok()) {
      const Outcome outcome = failed("logging metrics", logged);
      if (outcome != Outcome::sent) return outcome;
      dropped_points_ += pending_.size();
    }
    pending_.clear();
  }
  if (!finishing) return Outcome::sent;
  while (!artifacts_.empty()) {
    const Artifact& artifact = artifacts_.front();
    const Reply uploaded = run_.upload(artifact.relative, artifact.file);
    if (!uploaded.ok()) {
      const Outcome outcome = failed("uploading " + artifact.relative, uploaded);
      if (outcome != Outcome::sent) return outcome;
      refused_artifacts_.push_back(artifact.relative);
    }
    artifacts_.erase(artifacts_.begin());
  }
  if (!status_sent_ && !status_.empty()) {
    const Reply updated = run_.set_status(status_);
    if (!updated.ok()) {
      if (const Outcome outcome = failed("setting the run's status", updated); outcome != Outcome::sent) return outcome;
    }
    status_sent_ = true;
  }
  return Outcome::sent;
}

std::string Sender::unsent() {
  std::vector<MetricPoint> left = pending_;
  for (MetricPoint& point : read_metrics(setup_.run_directory / "metrics.jsonl", offset_, SIZE_MAX)) {
    left.push_back(std::move(point));
  }
  std::vector<std::string> parts;
  const std::size_t points = left.size() + dropped_points_;
  if (points > 0) {
    std::string part = std::to_string(points) + (points == 1 ? " metric value" : " metric values");
    if (!left.empty()) {
      const auto [low, high] =
          std::minmax_element(left.begin(), left.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
      part += " (steps " + std::to_string(low->step) + "-" + std::to_string(high->step) + ")";
    }
    parts.push_back(part);
  }
  if (!params_sent_) parts.push_back("the recipe's parameters");
  std::vector<std::string> artifacts = refused_artifacts_;
  for (const Artifact& artifact : artifacts_) artifacts.push_back(artifact.relative);
  if (!artifacts.empty()) {
    std::string part = "artifacts";
    for (std::size_t i = 0; i < artifacts.size(); ++i) part += (i ? ", " : " ") + artifacts[i];
    parts.push_back(part);
  }
  if (!status_.empty() && !status_sent_) parts.push_back("the status " + status_);
  if (parts.empty()) return "";
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text + (last_error_.empty() ? "" : " (" + last_error_ + ")");
}

}  // namespace mixt::mlflow
