// MLflow's REST API (2.0 endpoints) over libcurl: JSON calls and artifact uploads through
// the tracking server's proxied artifact API. Credentials come from the environment only
// (MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD), and no
// reply, header or error text repeats them.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace mixt::mlflow {

struct Reply {
  long status = 0;      // the HTTP status; 0 when no answer came (refused, timed out, bad URI)
  nlohmann::json body;  // the parsed JSON answer (null when it was not JSON)
  std::string error;    // why it failed, in a line: curl's reason or the server's message

  bool ok() const { return status >= 200 && status < 300; }
  // Worth another try later: no answer, a server error, or "too many requests".
  bool transient() const { return status == 0 || status >= 500 || status == 429; }
  // The server refuses these credentials: no retry will change that.
  bool unauthorized() const { return status == 401 || status == 403; }
};

class Client {
 public:
  // `uri`: the tracking server, http(s)://host:port[/prefix]. `timeout`: per request.
  Client(std::string uri, std::chrono::milliseconds timeout);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& uri() const { return uri_; }
  // POST /api/2.0/mlflow/<endpoint> with a JSON body.
  Reply post(const std::string& endpoint, const nlohmann::json& body);
  // GET /api/2.0/mlflow/<endpoint>?<query> (the query's values are escaped here).
  Reply get(const std::string& endpoint, const std::vector<std::pair<std::string, std::string>>& query);
  // PUT a file to the run's artifact root (its artifact_uri, "mlflow-artifacts:/1/<id>/artifacts")
  // as <relative>, through /api/2.0/mlflow-artifacts/artifacts.
  Reply upload(const std::string& artifact_uri, const std::string& relative, const std::filesystem::path& file);

 private:
  Reply perform(const std::string& method, const std::string& url, const std::string* body,
                const std::filesystem::path* file);
  std::string escape(const std::string& text);

  std::string uri_;
  std::chrono::milliseconds timeout_;
  void* curl_ = nullptr;  // one easy handle, reused: its connections stay open between calls
};

// An http(s) URI, or why it is not one ("" when it is).
std::string check_uri(const std::string& uri);

}  // namespace mixt::mlflow
