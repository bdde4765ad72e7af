#include "run_files.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace mixt::mlflow {

namespace fs = std::filesystem;

namespace {

bool is_clock_or_counter(const std::string& key) {
  return key == "epoch" || key == "step" || key == "epoch_step" || key == "epoch_elapsed_s" || key == "elapsed_s";
}

void flatten(const YAML::Node& node, const std::string& prefix, Pairs& out) {
  if (node.IsMap()) {
    for (const auto& entry : node)
      flatten(entry.second, (prefix.empty() ? "" : prefix + ".") + entry.first.Scalar(), out);
    return;
  }
  if (node.IsScalar()) {
    out.emplace_back(prefix, node.Scalar());
    return;
  }
  if (node.IsNull()) {
    out.emplace_back(prefix, "null");
    return;
  }
  YAML::Emitter flow;
  flow.SetSeqFormat(YAML::Flow);
  flow.SetMapFormat(YAML::Flow);
  flow << node;
  out.emplace_back(prefix, flow.c_str());
}

}  // namespace

std::vector<MetricPoint> metric_points(const std::string& line) {
  const nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  std::vector<MetricPoint> points;
  if (!event.is_object() || !event.contains("event") || !event.contains("step") || !event["step"].is_number()) {
    return points;
  }
  const std::string kind = event["event"].is_string() ? event["event"].get<std::string>() : "";
  if (kind != "step" && kind != "epoch") return points;
  const auto step = event["step"].get<std::int64_t>();
  for (const auto& [key, value] : event.items()) {
    if (!value.is_number() || is_clock_or_counter(key)) continue;  // NaN is written as null: none
    std::string name;
    if (kind == "step") {
      name = "train/" + key;
    } else if (key.rfind("val_", 0) == 0) {
      name = "val/" + key.substr(4);
    } else {
      name = "data/" + key;
    }
    points.push_back({name, value.get<double>(), step});
  }
  return points;
}

std::vector<MetricPoint> read_metrics(const fs::path& file, std::uintmax_t& offset, std::size_t max_points) {
  std::vector<MetricPoint> points;
  std::ifstream in(file, std::ios::binary);
  if (!in) return points;
  in.seekg(static_cast<std::streamoff>(offset));
  std::string line;
  while (points.size() < max_points && std::getline(in, line)) {
    if (in.eof()) break;  // no newline: the writer is still on it
    offset += line.size() + 1;
    for (MetricPoint& point : metric_points(line)) points.push_back(std::move(point));
  }
  return points;
}

Pairs recipe_params(const fs::path& recipe_yaml) {
  Pairs params;
  flatten(YAML::LoadFile(recipe_yaml.string()), "", params);
  return params;
}

RecipeTracking recipe_tracking(const fs::path& recipe_yaml) {
  RecipeTracking tracking;
  const YAML::Node recipe = YAML::LoadFile(recipe_yaml.string());
  const YAML::Node callbacks = recipe["callbacks"];
  if (!callbacks || !callbacks.IsSequence()) return tracking;
  for (const YAML::Node& entry : callbacks) {
    if (!entry.IsMap() || !entry["name"] || entry["name"].Scalar() != "mlflow") continue;
    tracking.found = true;
    const auto text = [&](const char* key) { return entry[key] && entry[key].IsScalar() ? entry[key].Scalar() : ""; };
    const auto list = [&](const char* key) {
      std::vector<std::string> items;
      if (entry[key] && entry[key].IsSequence()) {
        for (const YAML::Node& item : entry[key]) items.push_back(item.Scalar());
      }
      return items;
    };
    tracking.tracking_uri = text("tracking_uri");
    tracking.experiment = text("experiment");
    tracking.run_name = text("run_name");
    tracking.artifacts = list("artifacts");
    tracking.tags = list("tags");
    if (!entry["artifacts"]) tracking.artifacts = {"recipe"};  // the option's default
    break;
  }
  return tracking;
}

std::string read_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

void write_line(const fs::path& file, const std::string& text) {
  const fs::path temporary = file.string() + ".tmp";
  {
    std::ofstream out(temporary);
    out << text << "\n";
  }
  std::error_code ec;
  fs::rename(temporary, file, ec);
}

std::pair<std::string, std::string> split_tag(const std::string& tag) {
  const auto equals = tag.find('=');
  if (equals == std::string::npos || equals == 0) return {"", tag};
  return {tag.substr(0, equals), tag.substr(equals + 1)};
}

}  // namespace mixt::mlflow
