// Top-1 and top-k counts against torchvision's reference accuracy() on recorded logits
// (goldens: tests/golden/make_top_k_golden.py), ties included.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "train/accuracy.h"

namespace mixt {
namespace {

at::Tensor from_json(const nlohmann::json& rows) {
  std::vector<float> values;
  for (const auto& row : rows) {
    for (const auto& v : row) values.push_back(v.get<float>());
  }
  const auto n = static_cast<std::int64_t>(rows.size());
  return at::tensor(values).view({n, -1});
}

TEST(Accuracy, TopOneAndTopKCountAsTorchvisionsReference) {
  const auto golden = nlohmann::json::parse(testing::read_file(MIXT_SOURCE_DIR "/tests/golden/top_k_accuracy.json"));
  ASSERT_EQ(golden["cases"].size(), 3u);
  for (const auto& c : golden["cases"]) {
    const at::Tensor logits = from_json(c["logits"]);
    const at::Tensor labels = at::tensor(c["labels"].get<std::vector<std::int64_t>>());
    const std::int64_t k = top_k_for(logits.size(1));
    EXPECT_EQ(k, c["k"].get<std::int64_t>()) << c["name"];
    const at::Tensor counts = count_top1_and_top_k(logits, labels, k);
    EXPECT_EQ(counts[0].item<std::int64_t>(), c["top1"].get<std::int64_t>()) << c["name"];
    EXPECT_EQ(counts[1].item<std::int64_t>(), c["topk"].get<std::int64_t>()) << c["name"];
  }
}

}  // namespace
}  // namespace mixt
