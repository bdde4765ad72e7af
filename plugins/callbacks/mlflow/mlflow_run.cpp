#include "mlflow_run.h"

#include <chrono>

namespace mixt::mlflow {

using nlohmann::json;

namespace {
constexpr std::size_t kMetricsPerBatch = 1000, kParamsPerBatch = 100;
constexpr std::size_t kParamValueLimit = 6000;  // MLflow's limit on a parameter's value

std::string error_code(const Reply& reply) {
  return reply.body.is_object() && reply.body.contains("error_code") && reply.body["error_code"].is_string()
             ? reply.body["error_code"].get<std::string>()
             : "";
}
}  // namespace

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Reply Run::find_experiment(const std::string& name) {
  Reply found = client_.get("experiments/get-by-name", {{"experiment_name", name}});
  if (found.ok()) {
    experiment_id_ = found.body["experiment"]["experiment_id"].get<std::string>();
    return found;
  }
  if (error_code(found) != "RESOURCE_DOES_NOT_EXIST") return found;
  Reply created = client_.post("experiments/create", {{"name", name}});
  // Another process (a second run started at once) may have created it meanwhile.
  if (!created.ok() && error_code(created) == "RESOURCE_ALREADY_EXISTS") return find_experiment(name);
  if (created.ok()) experiment_id_ = created.body["experiment_id"].get<std::string>();
  return created;
}

Reply Run::create(const std::string& experiment, const std::string& run_name, const Pairs& tags) {
  Reply found = find_experiment(experiment);
  if (!found.ok()) return found;
  json body = {{"experiment_id", experiment_id_}, {"start_time", now_ms()}, {"tags", json::array()}};
  if (!run_name.empty()) body["run_name"] = run_name;
  for (const auto& [key, value] : tags) body["tags"].push_back({{"key", key}, {"value", value}});
  Reply created = client_.post("runs/create", body);
  if (!created.ok()) return created;
  const json& info = created.body["run"]["info"];
  id_ = info["run_id"].get<std::string>();
  artifact_uri_ = info.value("artifact_uri", "");
  status_ = info.value("status", "RUNNING");
  params_.clear();
  return created;
}

Reply Run::open(const std::string& id) {
  Reply got = client_.get("runs/get", {{"run_id", id}});
  if (!got.ok()) {
    if (error_code(got) == "RESOURCE_DOES_NOT_EXIST" && got.status != 404) got.status = 404;
    return got;
  }
  const json& info = got.body["run"]["info"];
  id_ = id;
  experiment_id_ = info.value("experiment_id", "");
  artifact_uri_ = info.value("artifact_uri", "");
  status_ = info.value("status", "");
  params_.clear();
  const json& data = got.body["run"].value("data", json::object());
  for (const json& param : data.value("params", json::array())) {
    params_[param.value("key", "")] = param.value("value", "");
  }
  return got;
}

Reply Run::log_params(const Pairs& params, std::vector<std::string>* changed) {
  json batch = json::array();
  Reply last;
  last.status = 200;
  const auto send = [&] {
    if (batch.empty()) return true;
    last = client_.post("runs/log-batch", {{"run_id", id_}, {"params", batch}});
    if (!last.ok()) return false;
    for (const json& p : batch) params_[p["key"].get<std::string>()] = p["value"].get<std::string>();
    batch = json::array();
    return true;
  };
  for (const auto& [key, full] : params) {
    const std::string value = full.size() > kParamValueLimit ? full.substr(0, kParamValueLimit - 3) + "..." : full;
    if (const auto it = params_.find(key); it != params_.end()) {
      if (it->second != value && changed) changed->push_back(key + ": " + it->second + " -> " + value);
      continue;
    }
    batch.push_back({{"key", key}, {"value", value}});
    if (batch.size() == kParamsPerBatch && !send()) return last;
  }
  send();
  return last;
}

Reply Run::log_metrics(const std::vector<MetricPoint>& points, std::int64_t timestamp_ms) {
  Reply last;
  last.status = 200;
  for (std::size_t begin = 0; begin < points.size(); begin += kMetricsPerBatch) {
    json metrics = json::array();
    for (std::size_t i = begin; i < std::min(points.size(), begin + kMetricsPerBatch); ++i) {
      metrics.push_back(
          {{"key", points[i].key}, {"value", points[i].value}, {"timestamp", timestamp_ms}, {"step", points[i].step}});
    }
    last = client_.post("runs/log-batch", {{"run_id", id_}, {"metrics", metrics}});
    if (!last.ok()) return last;
  }
  return last;
}

Reply Run::set_tag(const std::string& key, const std::string& value) {
  return client_.post("runs/set-tag", {{"run_id", id_}, {"key", key}, {"value", value}});
}

Reply Run::set_status(const std::string& status) {
  json body = {{"run_id", id_}, {"status", status}};
  if (status != "RUNNING") body["end_time"] = now_ms();
  Reply updated = client_.post("runs/update", body);
  if (updated.ok()) status_ = status;
  return updated;
}

Reply Run::upload(const std::string& relative, const std::filesystem::path& file) {
  return client_.upload(artifact_uri_, relative, file);
}

Reply Run::history(const std::string& key, std::vector<std::int64_t>& steps) {
  std::string page_token;
  do {
    std::vector<std::pair<std::string, std::string>> query = {
        {"run_id", id_}, {"metric_key", key}, {"max_results", "25000"}};
    if (!page_token.empty()) query.emplace_back("page_token", page_token);
    Reply page = client_.get("metrics/get-history", query);
    if (!page.ok()) return page;
    for (const json& metric : page.body.value("metrics", json::array())) steps.push_back(metric.value("step", 0));
    page_token = page.body.value("next_page_token", "");
    if (page_token.empty()) return page;
  } while (true);
}

}  // namespace mixt::mlflow
