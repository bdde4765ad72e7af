// mixt diagnose's float8 counts: underflow and saturation of a float8 cast, by hand against
// the formats' definitions (e4m3: largest 448, the step below it 32, smallest subnormal 2^-9;
// e5m2: 57344, 8192, 2^-16; round to nearest even, so |x·scale| ≤ half the smallest
// subnormal becomes 0), and against torchao's scales and cast (goldens:
// tests/golden/make_float8_diagnose_golden.py); the float8 helper's observer seam; the limits.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "diagnose/diagnosis.h"
#include "diagnose/float8_range.h"
#include "mixt/helpers/float8.h"
#include "test_support.h"

namespace mixt::diagnose {
namespace {

const at::Tensor kOne = at::scalar_tensor(1.0f);

TEST(Float8Range, AnOutlierMakesTheRestUnderflowUnderItsTensorwiseScale) {
  // scale = 448 / 1e6 = 4.48e-4; 2^-10 = 9.77e-4 is e4m3's rounding boundary to zero:
  // 1 -> 4.5e-4 and 2 -> 9.0e-4 and 1e-3 -> 4.5e-7 vanish; 3 -> 1.3e-3 and -5 -> 2.2e-3
  // round to ±2^-9; 1e6 -> 448; 0 is not counted.
  const at::Tensor x = at::tensor({1e6f, 1.0f, 2.0f, 3.0f, -5.0f, 0.0f, 1e-3f});
  const Float8CastCounts c =
      count_float8_cast(x, scale_for_float8(x.abs().max(), at::kFloat8_e4m3fn), at::kFloat8_e4m3fn);
  EXPECT_EQ(c.values, 7);
  EXPECT_EQ(c.nonzero, 6);
  EXPECT_EQ(c.underflow, 3);
  EXPECT_EQ(c.saturated, 0);  // the amax lands on 448: its own scale never saturates
  EXPECT_DOUBLE_EQ(c.underflow_fraction(), 0.5);
}

TEST(Float8Range, AJumpPastTheScaleSaturates) {
  // At scale 1 in e4m3, what rounding reaches 448 from goes up to 448 + 32/2 = 464 (a tie,
  // which rounds to 448's even mantissa): 500, 465 and -1000 are clamped, 464 and 448 are
  // not; 1e-4 < 2^-10 vanishes.
  const Float8CastCounts e4m3 =
      count_float8_cast(at::tensor({500.0f, 464.0f, 465.0f, -1000.0f, 448.0f, 1e-4f}), kOne, at::kFloat8_e4m3fn);
  EXPECT_EQ(e4m3.nonzero, 6);
  EXPECT_EQ(e4m3.saturated, 3);
  EXPECT_EQ(e4m3.underflow, 1);
  // e5m2 at scale 1: 57344 + 8192/2 = 61440; 2^-17 = 7.63e-6 rounds to zero's side:
  // 7e-6 and 3e-6 vanish, 2e-5 becomes 2^-16; 62000 and -1e5 are clamped, 60000 is not.
  const Float8CastCounts e5m2 =
      count_float8_cast(at::tensor({7e-6f, 3e-6f, 2e-5f, 60000.0f, 62000.0f, -1e5f}), kOne, at::kFloat8_e5m2);
  EXPECT_EQ(e5m2.underflow, 2);
  EXPECT_EQ(e5m2.saturated, 2);
  // The boundary to zero itself: 2^-10 is a tie and goes to 0, a little more to 2^-9.
  const Float8CastCounts edge =
      count_float8_cast(at::tensor({std::ldexp(1.0f, -10), std::ldexp(1.01f, -10)}), kOne, at::kFloat8_e4m3fn);
  EXPECT_EQ(edge.underflow, 1);
  // inf/NaN are no value of the count.
  EXPECT_EQ(count_float8_cast(at::tensor({INFINITY, NAN, 1.0f}), kOne, at::kFloat8_e4m3fn).nonzero, 1);
}

TEST(Float8Range, CountsEqualTorchaosCastOnTheGoldenCases) {
  const nlohmann::json golden = nlohmann::json::parse(
      testing::read_file(testing::configured::source_dir() + "/tests/golden/float8_diagnose.json"));
  ASSERT_EQ(golden["cases"].size(), 4u);
  for (const auto& c : golden["cases"]) {
    const auto& t = golden["tensors"][c["tensor"].get<std::string>()];
    const at::Tensor x =
        at::tensor(t["values"].get<std::vector<float>>()).reshape(t["shape"].get<std::vector<std::int64_t>>());
    const at::ScalarType dtype = c["dtype"] == "e4m3" ? at::kFloat8_e4m3fn : at::kFloat8_e5m2;
    const Float8CastCounts counts = count_float8_cast(x, at::scalar_tensor(c["scale"].get<float>()), dtype);
    EXPECT_EQ(counts.nonzero, c["nonzero"].get<std::int64_t>()) << c["name"];
    EXPECT_EQ(counts.underflow, c["underflow"].get<std::int64_t>()) << c["name"];
    EXPECT_EQ(counts.saturated, c["saturated"].get<std::int64_t>()) << c["name"];
  }
  // Not vacuous: the outliers' case underflows nearly all, the jump's saturates the four.
  EXPECT_GT(golden["cases"][0]["underflow"].get<int>(), 1900);
  EXPECT_EQ(golden["cases"][1]["saturated"], 4);
}

struct Recorded {
  Float8Operand operand;
  std::vector<std::int64_t> sizes;
  float scale;
  at::ScalarType dtype;
};

class Recorder final : public Float8CastObserver {
 public:
  void observe(Float8Operand operand, const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype) override {
    casts.push_back({operand, x.sizes().vec(), scale.item<float>(), dtype});
  }
  std::vector<Recorded> casts;
};

TEST(Float8Observer, SeesEveryCastWithItsScaleAndTheBackwardOfItsForward) {
  const at::Tensor input = (at::arange(32 * 16, at::kFloat).reshape({32, 16}) / 100).requires_grad_();
  const at::Tensor weight = (at::ones({16, 16}) / 4).requires_grad_();
  auto recorder = std::make_shared<Recorder>();
  at::Tensor out;
  {
    const Float8CastObserverScope scope(recorder);
    out = float8_linear(input, weight, at::Tensor());
  }
  ASSERT_EQ(recorder->casts.size(), 2u);  // input and weight
  EXPECT_EQ(recorder->casts[0].operand, Float8Operand::input);
  EXPECT_EQ(recorder->casts[0].dtype, at::kFloat8_e4m3fn);
  EXPECT_FLOAT_EQ(recorder->casts[0].scale, 448.0f / 5.11f);  // amax 511 / 100
  EXPECT_EQ(recorder->casts[1].operand, Float8Operand::weight);
  EXPECT_FLOAT_EQ(recorder->casts[1].scale, 448.0f / 0.25f);
  // Outside the scope nothing is reported, but the backward of the observed call is.
  float8_linear(input, weight, at::Tensor()).sum().backward();
  ASSERT_EQ(recorder->casts.size(), 2u);
  (out * 2).sum().backward();
  ASSERT_EQ(recorder->casts.size(), 3u);
  EXPECT_EQ(recorder->casts[2].operand, Float8Operand::grad_output);
  EXPECT_EQ(recorder->casts[2].dtype, at::kFloat8_e5m2);
  EXPECT_EQ(recorder->casts[2].sizes, (std::vector<std::int64_t>{32, 16}));
  EXPECT_FLOAT_EQ(recorder->casts[2].scale, 57344.0f / 2.0f);  // every output gradient 2
  // Given scales (delayed scaling) are what is reported.
  Float8LinearScales given{at::scalar_tensor(3.0f), at::scalar_tensor(5.0f), at::scalar_tensor(7.0f), {}};
  {
    const Float8CastObserverScope scope(recorder);
    float8_linear(input, weight, at::Tensor(), given).sum().backward();
  }
  ASSERT_EQ(recorder->casts.size(), 6u);
  EXPECT_EQ(recorder->casts[3].scale, 3.0f);
  EXPECT_EQ(recorder->casts[4].scale, 5.0f);
  EXPECT_EQ(recorder->casts[5].scale, 7.0f);
}

// Rowwise: every cast e4m3 with its per-row or per-column scales, the backward's four too.
class ScaleRecorder final : public Float8CastObserver {
 public:
  void observe(Float8Operand operand, const at::Tensor& /*x*/, const at::Tensor& scale, at::ScalarType dtype) override {
    operands.push_back(operand);
    scales.push_back(scale.clone());
    dtypes.push_back(dtype);
  }
  std::vector<Float8Operand> operands;
  std::vector<at::Tensor> scales;
  std::vector<at::ScalarType> dtypes;
};

TEST(Float8Observer, SeesTheRowwiseCastsWithTheirPerRowScales) {
  const at::Tensor input = (at::arange(32 * 16, at::kFloat).reshape({32, 16}) / 100).requires_grad_();
  const at::Tensor weight = (at::ones({8, 16}) / 4).requires_grad_();
  auto recorder = std::make_shared<ScaleRecorder>();
  {
    const Float8CastObserverScope scope(recorder);
    float8_rowwise_linear(input, weight, at::Tensor()).sum().backward();
  }
  using O = Float8Operand;
  EXPECT_EQ(recorder->operands,
            (std::vector<O>{O::input, O::weight, O::grad_output, O::weight, O::grad_output, O::input}));
  for (const at::ScalarType dtype : recorder->dtypes) EXPECT_EQ(dtype, at::kFloat8_e4m3fn);
  ASSERT_EQ(recorder->scales.size(), 6u);
  EXPECT_EQ(recorder->scales[0].sizes(), (std::vector<std::int64_t>{32, 1}));  // a scale per input row
  // Row 0's amax is 0.15: 448 / 0.15 = 2986.7, rounded down to 2^11; row 1's 0.31: 2^10.
  EXPECT_EQ(recorder->scales[0][0][0].item<float>(), 2048.0f);
  EXPECT_EQ(recorder->scales[0][1][0].item<float>(), 1024.0f);
  EXPECT_EQ(recorder->scales[1].sizes(), (std::vector<std::int64_t>{1, 8}));   // per output column of weight^T
  EXPECT_EQ(recorder->scales[1][0][0].item<float>(), 1024.0f);                 // 448 / 0.25 = 1792
  EXPECT_EQ(recorder->scales[2].sizes(), (std::vector<std::int64_t>{32, 1}));  // grad_output's rows
  EXPECT_EQ(recorder->scales[4].sizes(), (std::vector<std::int64_t>{1, 8}));   // and its columns
  EXPECT_EQ(recorder->scales[5].sizes(), (std::vector<std::int64_t>{1, 16}));  // input's columns
}

TEST(Float8Verdict, ALayerIsKeptAboveOnePercentUnderflowOrAHundredthOfAPercentSaturation) {
  const auto layer = [](std::int64_t underflow, std::int64_t saturated, std::size_t operand) {
    Float8Layer l{"fc", {}, {}};
    l.later[0] = {10000, 10000, 0, 0};
    l.later[operand] = {10000, 10000, underflow, saturated};
    return l;
  };
  EXPECT_FALSE(keep_in_bfloat16(layer(100, 1, 0)));  // exactly 1% and 0.01%: within
  EXPECT_TRUE(keep_in_bfloat16(layer(101, 0, 1)));
  EXPECT_TRUE(keep_in_bfloat16(layer(0, 2, 2)));
  // The first step is left out when there were later ones; alone, it is judged.
  Float8Layer first{"fc", {}, {}};
  first.first_step[2] = {100, 100, 100, 0};
  EXPECT_TRUE(keep_in_bfloat16(first));
  first.later[0] = {100, 100, 0, 0};
  EXPECT_FALSE(keep_in_bfloat16(first));
}

}  // namespace
}  // namespace mixt::diagnose
