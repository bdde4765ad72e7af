// The mlflow callback's background thread: everything that talks to the server happens here,
// never on the training thread. It creates (or continues) the MLflow run, follows
// metrics.jsonl as it grows and sends its new figures in batches, retrying with exponential
// backoff while the server is unreachable or slow; metrics.jsonl is its buffer, so memory
// stays bounded (one batch) however long the server is away, and nothing is lost. At the
// end it uploads the artifacts and sets the run's status, within a deadline, and says what
// it could not send.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mlflow_client.h"
#include "mlflow_run.h"
#include "run_files.h"

namespace mixt::mlflow {

struct SenderSetup {
  std::filesystem::path run_directory;
  std::string tracking_uri, experiment, run_name;
  std::string run_id;  // a resumed run's, from its checkpoint: continued instead of a new one
  Pairs params, tags;
  std::chrono::milliseconds request_timeout{10000};
};

struct Artifact {
  std::string relative;  // its path in the run's artifacts
  std::filesystem::path file;
};

class Sender {
 public:
  explicit Sender(SenderSetup setup);
  ~Sender();
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // metrics.jsonl has grown: send soon (the thread also looks every few seconds).
  void wake();
  // The MLflow run's id once the server gave one ("" before).
  std::string run_id() const;
  // Uploads `artifacts`, sets `status` and stops, within `deadline`. Returns what was not
  // sent, in a sentence ("" when everything was).
  std::string finish(const std::string& status, std::vector<Artifact> artifacts, std::chrono::milliseconds deadline);

 private:
  enum class Outcome { sent, retry, give_up };
  void loop();
  Outcome send_some(bool finishing);
  Outcome set_up_run();
  Outcome failed(const std::string& what, const Reply& reply);
  std::string unsent();

  SenderSetup setup_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool woken_ = true, finishing_ = false, finish_requested_ = false;  // woken: the run is made at once
  std::chrono::milliseconds backoff_{0};                              // before the next try; 0: the server answers
  std::string status_;
  std::vector<Artifact> artifacts_;
  std::chrono::steady_clock::time_point deadline_;
  std::string run_id_;  // guarded by mutex_

  // The thread's own (read by finish() once it has joined).
  Client client_;
  Run run_;
  std::uintmax_t offset_ = 0;
  std::vector<MetricPoint> pending_;
  std::int64_t pending_timestamp_ = 0;  // kept across retries: MLflow drops an identical resend
  bool run_ready_ = false, params_sent_ = false, status_sent_ = false, gave_up_ = false;
  bool warned_unreachable_ = false, warned_refused_ = false;
  std::size_t dropped_points_ = 0;
  std::string last_error_;
  std::vector<std::string> refused_artifacts_;
  std::thread thread_;
};

}  // namespace mixt::mlflow
