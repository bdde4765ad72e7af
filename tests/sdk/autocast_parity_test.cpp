// Autocast parity: inside mixt::AutocastScope, each op of the table gives the dtype that
// torch.autocast gives in Python on the same device. Golden: tests/golden/autocast_dtypes.json
// from tests/golden/make_autocast_golden.py (mirrored case by case below).
// bench/gpu/precision_check.sh reruns this test on CUDA with a golden made there:
// MIXT_AUTOCAST_DEVICE=cuda MIXT_AUTOCAST_GOLDEN=<file>.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <functional>
#include <map>

#include "mixt/autocast.h"
#include "test_support.h"

namespace mixt {
namespace {

using Op = std::function<at::Tensor()>;

std::map<std::string, Op> cases(at::ScalarType low, at::Device device) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  auto r = [&](std::vector<std::int64_t> shape) { return at::randn(shape, generator).to(device); };
  const at::Tensor x4 = r({2, 3, 8, 8}), w4 = r({4, 3, 3, 3}), b4 = r({4});
  const at::Tensor x2 = r({4, 8}), w2 = r({5, 8}), b2 = r({5});
  const at::Tensor targets = at::tensor({0, 1, 2, 4}, at::kLong).to(device);
  const at::Tensor bn_w = r({3}), bn_b = r({3});
  const at::Tensor ln_w = r({8}), ln_b = r({8}), logits = r({4, 5});
  const auto options = at::TensorOptions().device(device);
  auto batch_norm = [=](const at::Tensor& x) {
    return at::batch_norm(x, bn_w, bn_b, at::zeros({3}, options), at::ones({3}, options), true, 0.1, 1e-5, true);
  };
  const at::Tensor x3 = x4.slice(1, 0, 3);
  return {
      {"conv2d", [=] { return at::conv2d(x4, w4, b4, 1, 1); }},
      {"linear", [=] { return at::linear(x2, w2, b2); }},
      {"matmul", [=] { return at::matmul(x2, w2.t()); }},
      {"softmax", [=] { return at::softmax(x2, 1); }},
      {"softmax_low", [=] { return at::softmax(x2.to(low), 1); }},
      {"log_softmax", [=] { return at::log_softmax(x2, 1); }},
      {"log_softmax_low", [=] { return at::log_softmax(x2.to(low), 1); }},
      {"layer_norm", [=] { return at::layer_norm(x2, {8}, ln_w, ln_b); }},
      {"layer_norm_low", [=] { return at::layer_norm(x2.to(low), {8}, ln_w, ln_b); }},
      {"batch_norm", [=] { return batch_norm(x3); }},
      {"batch_norm_low", [=] { return batch_norm(x3.to(low)); }},
      {"cross_entropy", [=] { return at::cross_entropy_loss(logits, targets); }},
      {"cross_entropy_low", [=] { return at::cross_entropy_loss(logits.to(low), targets); }},
      {"add_low_float", [=] { return at::add(x2.to(low), x2); }},
      {"cat_low_float", [=] { return at::cat({x2.to(low), x2}); }},
  };
}

TEST(AutocastParity, OutputDtypesMatchTorchAutocast) {
  const char* device_env = std::getenv("MIXT_AUTOCAST_DEVICE");
  const char* golden_env = std::getenv("MIXT_AUTOCAST_GOLDEN");
  const at::Device device(device_env ? device_env : "cpu");
  const std::string golden_file =
      golden_env ? golden_env : (testing::source_dir() / "tests/golden/autocast_dtypes.json").string();
  const auto golden = nlohmann::json::parse(testing::read_file(golden_file));
  ASSERT_EQ(golden.at("device").get<std::string>(), device.str());
  for (at::ScalarType low : {at::kHalf, at::kBFloat16}) {
    const auto& expected = golden.at("dtypes").at(c10::toString(low));
    const auto ops = cases(low, device);
    ASSERT_EQ(ops.size(), expected.size()) << "the C++ table must mirror the generator's";
    for (const auto& [name, op] : ops) {
      at::ScalarType got;
      {
        AutocastScope scope(device.type(), low);
        got = op().scalar_type();
      }
      EXPECT_EQ(c10::toString(got), expected.at(name).get<std::string>()) << name << " under " << low;
    }
    // Outside the scope nothing is cast.
    EXPECT_EQ(ops.at("linear")().scalar_type(), at::kFloat);
  }
}

}  // namespace
}  // namespace mixt
