// One MLflow run through the REST client: found or created (in an experiment found or
// created by name), continued by id, filled in batches within the server's limits (1000
// metrics, 100 parameters per log-batch), its artifacts uploaded and its status set. Each
// call answers the first Reply that failed, or an ok one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mlflow_client.h"
#include "run_files.h"

namespace mixt::mlflow {

std::int64_t now_ms();

class Run {
 public:
  explicit Run(Client& client) : client_(client) {}

  const std::string& id() const { return id_; }
  const std::string& experiment_id() const { return experiment_id_; }

  // A new run named `run_name` ("" lets the server pick one) with these tags.
  Reply create(const std::string& experiment, const std::string& run_name, const Pairs& tags);
  // The run `id`, as the server has it (its parameters into params()). A run the server
  // does not know answers 404.
  Reply open(const std::string& id);
  const std::map<std::string, std::string>& params() const { return params_; }
  const std::string& status() const { return status_; }

  // The parameters the run lacks; one already there with another value is left as it was
  // (MLflow parameters cannot change) and listed in `changed` as "key: old -> new".
  Reply log_params(const Pairs& params, std::vector<std::string>* changed = nullptr);
  Reply log_metrics(const std::vector<MetricPoint>& points, std::int64_t timestamp_ms);
  Reply set_tag(const std::string& key, const std::string& value);
  Reply set_status(const std::string& status);
  Reply upload(const std::string& relative, const std::filesystem::path& file);
  // The steps each metric already has on the server.
  Reply history(const std::string& key, std::vector<std::int64_t>& steps);

 private:
  Reply find_experiment(const std::string& name);

  Client& client_;
  std::string id_, experiment_id_, artifact_uri_, status_;
  std::map<std::string, std::string> params_;
};

}  // namespace mixt::mlflow
