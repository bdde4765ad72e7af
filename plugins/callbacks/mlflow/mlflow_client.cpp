#include "mlflow_client.h"

#include <curl/curl.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace mixt::mlflow {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::size_t collect(char* data, std::size_t size, std::size_t count, void* into) {
  static_cast<std::string*>(into)->append(data, size * count);
  return size * count;
}

// The server's own words when it gave any ({"error_code": ..., "message": ...}).
std::string server_message(const Reply& reply, const std::string& text) {
  if (reply.body.is_object() && reply.body.contains("message") && reply.body["message"].is_string()) {
    return reply.body["message"].get<std::string>();
  }
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}

}  // namespace

std::string check_uri(const std::string& uri) {
  if (uri.empty()) return "no tracking URI: set mlflow.tracking_uri in the recipe or MLFLOW_TRACKING_URI";
  if (uri.rfind("http://", 0) != 0 && uri.rfind("https://", 0) != 0) {
    return "tracking URI '" + uri +
           "' is not http:// or https:// (a tracking server's address; file stores are "
           "not spoken to directly)";
  }
  return "";
}

Client::Client(std::string uri, std::chrono::milliseconds timeout) : uri_(std::move(uri)), timeout_(timeout) {
  while (!uri_.empty() && uri_.back() == '/') uri_.pop_back();
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
}

Client::~Client() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

std::string Client::escape(const std::string& text) {
  char* escaped = curl_easy_escape(static_cast<CURL*>(curl_), text.c_str(), static_cast<int>(text.size()));
  std::string out = escaped ? escaped : "";
  curl_free(escaped);
  return out;
}

Reply Client::post(const std::string& endpoint, const nlohmann::json& body) {
  const std::string text = body.dump();
  return perform("POST", uri_ + "/api/2.0/mlflow/" + endpoint, &text, nullptr);
}

Reply Client::get(const std::string& endpoint, const std::vector<std::pair<std::string, std::string>>& query) {
  std::string url = uri_ + "/api/2.0/mlflow/" + endpoint;
  for (std::size_t i = 0; i < query.size(); ++i) {
    url += (i ? "&" : "?") + query[i].first + "=" + escape(query[i].second);
  }
  return perform("GET", url, nullptr, nullptr);
}

Reply Client::upload(const std::string& artifact_uri, const std::string& relative, const std::filesystem::path& file) {
  // The proxied artifact API serves the run's root as mlflow-artifacts:/<experiment>/<run>/artifacts.
  const std::string scheme = "mlflow-artifacts:";
  if (artifact_uri.rfind(scheme, 0) != 0) {
    Reply refused;
    refused.status = 400;
    refused.error = "the run's artifact root " + artifact_uri +
                    " is not served by the tracking server (start it with --serve-artifacts, docs/tracking.md)";
    return refused;
  }
  std::string path = artifact_uri.substr(scheme.size());
  while (!path.empty() && path.front() == '/') path.erase(0, 1);
  std::string escaped;  // each segment escaped, the slashes kept
  for (std::size_t begin = 0; begin <= relative.size();) {
    const std::size_t end = std::min(relative.find('/', begin), relative.size());
    if (begin > 0) escaped += '/';
    escaped += escape(relative.substr(begin, end - begin));
    begin = end + 1;
  }
  return perform("PUT", uri_ + "/api/2.0/mlflow-artifacts/artifacts/" + path + "/" + escaped, nullptr, &file);
}

Reply Client::perform(const std::string& method, const std::string& url, const std::string* body,
                      const std::filesystem::path* file) {
  Reply reply;
  CURL* curl = static_cast<CURL*>(curl_);
  if (!curl) {
    reply.error = "libcurl could not start";
    return reply;
  }
  curl_easy_reset(curl);
  std::string received;
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: this runs off the main thread
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min<long long>(timeout_.count(), 5000)));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &received);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "mixt-mlflow/1.0");
  if (const std::string token = environment("MLFLOW_TRACKING_TOKEN"); !token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  } else if (const std::string user = environment("MLFLOW_TRACKING_USERNAME"); !user.empty()) {
    const std::string password = environment("MLFLOW_TRACKING_PASSWORD");
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, user.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, password.c_str());
  }
  if (environment("MLFLOW_TRACKING_INSECURE_TLS") == "true") {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  std::FILE* upload = nullptr;
  if (body) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body->c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
  } else if (file) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(*file, ec);
    upload = ec ? nullptr : std::fopen(file->c_str(), "rb");
    if (!upload) {
      curl_slist_free_all(headers);
      reply.status = 400;  // not the server's fault: not worth a retry
      reply.error = "cannot read " + file->string();
      return reply;
    }
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READDATA, upload);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
  }
  if (method == "GET") curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  const CURLcode code = curl_easy_perform(curl);
  if (upload) std::fclose(upload);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    reply.error = error[0] ? error : curl_easy_strerror(code);
    return reply;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  reply.body = nlohmann::json::parse(received, nullptr, /*allow_exceptions=*/false);
  if (reply.body.is_discarded()) reply.body = nullptr;
  if (!reply.ok()) reply.error = "HTTP " + std::to_string(reply.status) + ": " + server_message(reply, received);
  return reply;
}

}  // namespace mixt::mlflow
