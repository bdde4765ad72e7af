#include "reports/evaluation_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mixt::cli {

namespace {
std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f%%", 100.0 * fraction);
  return std::isfinite(fraction) ? text : "-";
}

std::int64_t row_sum(const at::Tensor& confusion, std::int64_t row) {
  return confusion[row].sum().item<std::int64_t>();
}
}  // namespace

std::string report_text(const EvaluationReport& report, bool per_class) {
  const Evaluation& e = report.evaluation;
  char text[512];
  std::snprintf(text, sizeof(text), "%s (%s weights) on data.%s, precision %s\n  samples  %lld\n  loss     %.4f\n",
                report.source.c_str(), report.weights.c_str(), report.split.c_str(), report.precision.c_str(),
                static_cast<long long>(e.samples), e.loss);
  std::string figures;
  for (const Figure& figure : e.figures) {
    char value[32];
    std::snprintf(value, sizeof(value), "%.4f", figure.value);
    const std::string shown = figure.percent ? percent(figure.value) : std::isfinite(figure.value) ? value : "-";
    figures += "  " + figure.label + std::string(figure.label.size() < 8 ? 8 - figure.label.size() : 0, ' ') + " " +
               shown + "\n";
  }
  std::string out = text + figures;
  if (!per_class || !report.confusion.defined()) return out;
  int width = 5;  // "class"
  for (const std::string& name : report.class_names) width = std::max(width, static_cast<int>(name.size()));
  std::snprintf(text, sizeof(text), "%s:\n  %-*s  %8s  %8s", report.per_class_title.c_str(), width, "class", "samples",
                "correct");
  out += text;
  for (const ClassFigure& column : report.per_class) {
    std::snprintf(text, sizeof(text), "  %8s", column.name.c_str());
    out += text;
  }
  out += "\n";
  for (std::int64_t row = 0; row < report.confusion.size(0); ++row) {
    std::snprintf(text, sizeof(text), "  %-*s  %8lld  %8lld", width,
                  report.class_names[static_cast<std::size_t>(row)].c_str(),
                  static_cast<long long>(row_sum(report.confusion, row)),
                  static_cast<long long>(report.confusion[row][row].item<std::int64_t>()));
    out += text;
    for (const ClassFigure& column : report.per_class) {
      const double value = column.values.at(static_cast<std::size_t>(row));
      char plain[32];
      std::snprintf(plain, sizeof(plain), "%.4f", value);
      std::snprintf(text, sizeof(text), "  %8s", column.percent ? percent(value).c_str() : plain);
      out += text;
    }
    out += "\n";
  }
  return out;
}

nlohmann::json report_json(const EvaluationReport& report) {
  const Evaluation& e = report.evaluation;
  nlohmann::json out = {{"source", report.source},
                        {"weights", report.weights},
                        {"split", report.split},
                        {"precision", report.precision},
                        {"samples", e.samples},
                        {"loss", e.loss}};
  for (const Figure& figure : e.figures) out[figure.name] = figure.value;  // top1 and top5, or perplexity
  if (!report.confusion.defined()) return out;
  nlohmann::json classes = nlohmann::json::array(), matrix = nlohmann::json::array();
  for (std::int64_t row = 0; row < report.confusion.size(0); ++row) {
    const auto i = static_cast<std::size_t>(row);
    nlohmann::json entry = {{"class", report.class_names[i]},
                            {"samples", row_sum(report.confusion, row)},
                            {"correct", report.confusion[row][row].item<std::int64_t>()}};
    // NaN, written as null: a class without samples.
    for (const ClassFigure& column : report.per_class) entry[column.name] = column.values.at(i);
    classes.push_back(entry);
    const at::Tensor counts = report.confusion[row].contiguous();
    matrix.push_back(
        std::vector<std::int64_t>(counts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>() + counts.numel()));
  }
  out["per_class"] = classes;
  out["confusion"] = matrix;
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string confusion_csv(const at::Tensor& confusion, const std::vector<std::string>& names) {
  std::string out = csv_field("label \\ predicted");
  for (const std::string& name : names) out += "," + csv_field(name);
  out += "\n";
  for (std::int64_t i = 0; i < confusion.size(0); ++i) {
    out += csv_field(names[static_cast<std::size_t>(i)]);
    for (std::int64_t j = 0; j < confusion.size(1); ++j)
      out += "," + std::to_string(confusion[i][j].item<std::int64_t>());
    out += "\n";
  }
  return out;
}

}  // namespace mixt::cli
