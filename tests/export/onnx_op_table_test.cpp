// Every entry of mixt export's ATen -> ONNX op table (framework/src/export/onnx_op_table.cpp)
// on its own: a one-op model traced at batch 2, translated at opset 17 (the default) and 21
// (the highest), run by ONNX Runtime at batches 1 and 3 against the model's eager forward
// (tests/support/export_reference.py measures; this test judges).
#include "export/onnx_op_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "doc_tables.h"
#include "export/onnx_file.h"
#include "export/onnx_translation.h"
#include "export/traced_model.h"
#include "mixt/error.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/traced_sizes.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

// A model of one op: parameters made by `init`, `forward` the op under test.
class OpModel : public torch::nn::Module {
 public:
  at::Tensor& add(const std::string& name, const at::Tensor& value) {
    return register_parameter(name, value, /*requires_grad=*/false);
  }
  at::Tensor get(const std::string& name) { return named_parameters(false)[name]; }
};

struct OpCase {
  std::string name;  // the case, named after the ATen op it must record
  std::string op;    // "aten::relu_"
  std::vector<std::int64_t> sample;
  std::function<void(OpModel&)> init;
  std::function<at::Tensor(OpModel&, const at::Tensor&)> forward;
  // The input of a shape ([batch, *sample]): normal floats unless the op takes indices.
  std::function<at::Tensor(const std::vector<std::int64_t>&)> input = [](const std::vector<std::int64_t>& shape) {
    return at::randn(shape);
  };
};

at::Tensor token_ids(const std::vector<std::int64_t>& shape) { return at::randint(0, 10, shape, at::kLong); }

std::vector<OpCase> op_cases() {
  auto none = [](OpModel&) {};
  auto conv_params = [](OpModel& m) {
    m.add("weight", at::randn({6, 4, 3, 3}));
    m.add("bias", at::randn({6}));
  };
  return {
      {"convolution",
       "aten::_convolution",
       {4, 9, 9},
       conv_params,
       [](OpModel& m, const at::Tensor& x) {
         return at::_convolution(x, m.get("weight"), m.get("bias"), {2, 2}, {1, 1}, {1, 1}, false, {0, 0}, 1, false,
                                 false, true, true);
       }},
      {"convolution_grouped_dilated",
       "aten::_convolution",
       {4, 9, 9},
       [](OpModel& m) {
         m.add("weight", at::randn({8, 2, 3, 3}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::conv2d(x, m.get("weight"), {}, 1, 2, 2, 2); }},
      {"convolution_transposed",
       "aten::_convolution",
       {4, 5, 6},
       [](OpModel& m) {
         m.add("weight", at::randn({4, 3, 3, 2}));  // [in, out / groups, kH, kW]
         m.add("bias", at::randn({6}));
       },
       [](OpModel& m, const at::Tensor& x) {
         return at::conv_transpose2d(x, m.get("weight"), m.get("bias"), {2, 3}, {1, 0}, {1, 2}, 2, {1, 1});
       }},
      {"convolution_transposed_dilated_1d",
       "aten::_convolution",
       {3, 7},
       [](OpModel& m) {
         m.add("weight", at::randn({3, 5, 3}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::conv_transpose1d(x, m.get("weight"), {}, 2, 1, 1, 1, 2); }},
      {"convolution_1d",
       "aten::_convolution",
       {3, 11},
       [](OpModel& m) {
         m.add("weight", at::randn({5, 3, 4}));
         m.add("bias", at::randn({5}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::conv1d(x, m.get("weight"), m.get("bias"), 2, 1); }},
      {"convolution_3d",
       "aten::_convolution",
       {2, 5, 6, 4},
       [](OpModel& m) {
         m.add("weight", at::randn({4, 2, 3, 3, 2}));
       },
       [](OpModel& m, const at::Tensor& x) {
         return at::conv3d(x, m.get("weight"), {}, {1, 2, 1}, {1, 1, 0});
       }},
      {"adaptive_avg_pool2d_global",
       "aten::adaptive_avg_pool2d",
       {3, 7, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::adaptive_avg_pool2d(x, {1, 1});
       }},
      {"adaptive_avg_pool2d_divisible",
       "aten::adaptive_avg_pool2d",
       {3, 8, 6},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::adaptive_avg_pool2d(x, {4, 3});
       }},
      {"adaptive_avg_pool2d_general",
       "aten::adaptive_avg_pool2d",
       {3, 5, 2},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::adaptive_avg_pool2d(x, {3, 7});
       }},
      {"add",
       "aten::add",
       {5, 4},
       [](OpModel& m) { m.add("b", at::randn({4})); },
       [](OpModel& m, const at::Tensor& x) { return at::add(x, m.get("b"), 0.5) + 2.0; }},
      {"add_", "aten::add_", {5, 4}, none, [](OpModel&, const at::Tensor& x) { return at::relu(x).add_(x); }},
      {"batch_norm",
       "aten::batch_norm",
       {3, 4, 4},
       [](OpModel& m) {
         m.add("w", at::randn({3}));
         m.add("b", at::randn({3}));
         m.add("mean", at::randn({3}));
         m.add("var", at::rand({3}) + 0.5);
       },
       [](OpModel& m, const at::Tensor& x) {
         return at::batch_norm(x, m.get("w"), m.get("b"), m.get("mean"), m.get("var"), false, 0.1, 1e-5, false);
       }},
      {"cos", "aten::cos", {9}, none, [](OpModel&, const at::Tensor& x) { return at::cos(x * 3.0); }},
      {"cat",
       "aten::cat",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::cat({x, x * 2.0}, 1);
       }},
      {"chunk",
       "aten::chunk",
       {7, 2},
       none,
       [](OpModel&, const at::Tensor& x) {
         const auto c = x.chunk(3, 1);
         return at::cat({c[2], c[0] * 3.0, c[1]}, 1);
       }},
      {"contiguous",
       "aten::contiguous",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) { return x.transpose(1, 2).contiguous(); }},
      {"dropout", "aten::dropout", {6}, none, [](OpModel&, const at::Tensor& x) { return at::dropout(x, 0.5, false); }},
      {"dropout_",
       "aten::dropout_",
       {6},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 1.0;
         return at::dropout_(y, 0.5, false);
       }},
      {"expand_as",
       "aten::expand_as",
       {3, 4},
       [](OpModel& m) {
         m.add("t", at::randn({1, 1, 4}));
       },
       [](OpModel& m, const at::Tensor& x) { return m.get("t").expand_as(x) + x; }},
      {"feature_dropout",
       "aten::feature_dropout",
       {3, 4, 4},
       none,
       [](OpModel&, const at::Tensor& x) { return at::feature_dropout(x, 0.5, false); }},
      {"flatten", "aten::flatten", {3, 4, 5}, none, [](OpModel&, const at::Tensor& x) { return x.flatten(1); }},
      {"flatten_inner",
       "aten::flatten",
       {3, 4, 5, 2},
       none,
       [](OpModel&, const at::Tensor& x) { return x.flatten(2, 3) * 2.0; }},
      {"gelu", "aten::gelu", {9}, none, [](OpModel&, const at::Tensor& x) { return at::gelu(x); }},
      {"gelu_tanh", "aten::gelu", {9}, none, [](OpModel&, const at::Tensor& x) { return at::gelu(x, "tanh"); }},
      // Up and down, both corner conventions (align_corners false: ONNX pytorch_half_pixel).
      {"upsample_bilinear2d",
       "aten::upsample_bilinear2d",
       {2, 5, 7},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::upsample_bilinear2d(x, {11, 9}, false);
       }},
      {"upsample_bilinear2d_align_corners_down",
       "aten::upsample_bilinear2d",
       {2, 8, 6},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::upsample_bilinear2d(x, {3, 4}, true);
       }},
      // Back to the input's size as the graph reads it (aten::size -> prim::NumToTensor ->
      // aten::Int -> the output size): one case for each op that records.
      {"size_of_input",
       "aten::size",
       {2, 8, 6},
       none,
       [](OpModel&, const at::Tensor& x) { return upsample_bilinear_like(at::avg_pool2d(x, 2), x); }},
      {"int_of_traced_size",
       "aten::Int",
       {3, 5, 7},
       none,
       [](OpModel&, const at::Tensor& x) { return upsample_bilinear_like(at::avg_pool2d(x, 2), x, true); }},
      {"hardsigmoid",
       "aten::hardsigmoid",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::hardsigmoid(x * 4.0); }},
      {"hardsigmoid_",
       "aten::hardsigmoid_",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 4.0;
         return at::hardsigmoid_(y);
       }},
      {"hardswish", "aten::hardswish", {9}, none, [](OpModel&, const at::Tensor& x) { return at::hardswish(x * 4.0); }},
      {"hardswish_",
       "aten::hardswish_",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 4.0;
         return at::hardswish_(y);
       }},
      {"hardtanh",
       "aten::hardtanh",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::hardtanh(x * 4.0, 0.0, 6.0); }},
      {"hardtanh_",
       "aten::hardtanh_",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 4.0;
         return at::hardtanh_(y, -1.0, 2.0);
       }},
      {"layer_norm",
       "aten::layer_norm",
       {3, 8},
       [](OpModel& m) {
         m.add("w", at::randn({8}));
         m.add("b", at::randn({8}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::layer_norm(x, {8}, m.get("w"), m.get("b"), 1e-6); }},
      {"linear",
       "aten::linear",
       {5},
       [](OpModel& m) {
         m.add("w", at::randn({3, 5}));
         m.add("b", at::randn({3}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::linear(x, m.get("w"), m.get("b")); }},
      {"linear_3d",
       "aten::linear",
       {4, 5},
       [](OpModel& m) {
         m.add("w", at::randn({3, 5}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::linear(x, m.get("w")); }},
      {"addmm",
       "aten::addmm",
       {5},
       [](OpModel& m) {
         m.add("w", at::randn({5, 3}));
         m.add("b", at::randn({3}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::addmm(m.get("b"), x, m.get("w"), 0.5, 2.0); }},
      {"t",
       "aten::t",
       {5},
       [](OpModel& m) {
         m.add("w", at::randn({3, 5}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::mm(x, m.get("w").t()); }},
      {"mm",
       "aten::mm",
       {5},
       [](OpModel& m) {
         m.add("w", at::randn({5, 3}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::mm(x, m.get("w")); }},
      {"matmul",
       "aten::matmul",
       {4, 5},
       [](OpModel& m) {
         m.add("w", at::randn({5, 2}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::matmul(x, m.get("w")); }},
      {"max_pool2d",
       "aten::max_pool2d",
       {2, 9, 9},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
       }},
      {"max_pool2d_ceil",
       "aten::max_pool2d",
       {2, 8, 8},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::max_pool2d(x, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true);
       }},
      {"mean",
       "aten::mean",
       {3, 4, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.mean({-1, 1}, true);
       }},
      {"mul",
       "aten::mul",
       {4},
       [](OpModel& m) { m.add("s", at::randn({4})); },
       [](OpModel& m, const at::Tensor& x) { return x * m.get("s") * 0.5; }},
      {"mul_", "aten::mul_", {4}, none, [](OpModel&, const at::Tensor& x) { return at::relu(x).mul_(x); }},
      {"narrow", "aten::narrow", {5, 3}, none, [](OpModel&, const at::Tensor& x) { return x.narrow(1, 1, 3); }},
      {"neg", "aten::neg", {9}, none, [](OpModel&, const at::Tensor& x) { return -x; }},
      {"permute",
       "aten::permute",
       {2, 3, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.permute({0, 2, 3, 1});
       }},
      {"pow", "aten::pow", {9}, none, [](OpModel&, const at::Tensor& x) { return x.pow(2) * 0.5 + x.pow(3); }},
      {"relu", "aten::relu", {9}, none, [](OpModel&, const at::Tensor& x) { return at::relu(x); }},
      {"relu_",
       "aten::relu_",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 1.0;
         return at::relu_(y);
       }},
      {"rsqrt", "aten::rsqrt", {7}, none, [](OpModel&, const at::Tensor& x) { return at::rsqrt(x * x + 1e-5); }},
      {"reshape",
       "aten::reshape",
       {4, 6},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.reshape({-1, 3, 8});
       }},
      {"scaled_dot_product_attention",
       "aten::scaled_dot_product_attention",
       {2, 5, 8},
       none,
       [](OpModel&, const at::Tensor& x) { return at::scaled_dot_product_attention(x, x * 0.5, x + 1.0); }},
      {"scaled_dot_product_attention_causal",
       "aten::scaled_dot_product_attention",
       {2, 5, 8},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::scaled_dot_product_attention(x, x * 0.5, x + 1.0, {}, 0.0, /*is_causal=*/true);
       }},
      // Fewer queries than keys: ATen aligns the causal mask top-left.
      {"scaled_dot_product_attention_causal_short_queries",
       "aten::scaled_dot_product_attention",
       {2, 5, 8},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::scaled_dot_product_attention(x.narrow(2, 0, 3), x * 0.5, x + 1.0, {}, 0.0, /*is_causal=*/true);
       }},
      // Grouped-query attention: 4 query heads, 2 key/value heads (Llama's).
      {"scaled_dot_product_attention_grouped_causal",
       "aten::scaled_dot_product_attention",
       {4, 5, 8},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::scaled_dot_product_attention(x, x.narrow(1, 0, 2) * 0.5, x.narrow(1, 2, 2) + 1.0, {}, 0.0,
                                                 /*is_causal=*/true, /*scale=*/0.3, /*enable_gqa=*/true);
       }},
      {"select", "aten::select", {3, 4}, none, [](OpModel&, const at::Tensor& x) { return x.select(1, 2); }},
      {"select_first_sample",
       "aten::select",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) { return x + x.select(0, 0); }},
      {"sub", "aten::sub", {5}, none, [](OpModel&, const at::Tensor& x) { return x.sub(x * x, 1.5) - 2.0; }},
      {"sigmoid", "aten::sigmoid", {9}, none, [](OpModel&, const at::Tensor& x) { return at::sigmoid(x); }},
      {"sigmoid_",
       "aten::sigmoid_",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 1.0;
         return at::sigmoid_(y);
       }},
      {"silu", "aten::silu", {9}, none, [](OpModel&, const at::Tensor& x) { return at::silu(x); }},
      {"sin", "aten::sin", {9}, none, [](OpModel&, const at::Tensor& x) { return at::sin(x * 3.0); }},
      {"silu_",
       "aten::silu_",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 1.0;
         return at::silu_(y);
       }},
      {"slice", "aten::slice", {6, 2}, none, [](OpModel&, const at::Tensor& x) { return x.slice(1, 1, 5, 2); }},
      {"ones_like",
       "aten::ones_like",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) { return x + at::ones_like(x); }},
      {"cumsum", "aten::cumsum", {3, 4}, none, [](OpModel&, const at::Tensor& x) { return x.cumsum(1); }},
      {"embedding",
       "aten::embedding",
       {5},
       [](OpModel& m) {
         m.add("weight", at::randn({10, 4}));
       },
       [](OpModel& m, const at::Tensor& ids) { return at::embedding(m.get("weight"), ids); },
       token_ids},
      {"softmax", "aten::softmax", {3, 5}, none, [](OpModel&, const at::Tensor& x) { return x.softmax(-1); }},
      {"transpose", "aten::transpose", {3, 4}, none, [](OpModel&, const at::Tensor& x) { return x.transpose(0, 2); }},
      // A cast there and back (what RMSNorm's float32 arithmetic records), and one to nothing new.
      {"to",
       "aten::to",
       {6},
       none,
       [](OpModel&, const at::Tensor& x) { return x.to(at::kDouble).mul(2.0).to(at::kFloat) + x.to(at::kFloat); }},
      {"unflatten",
       "aten::unflatten",
       {12, 2},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.unflatten(1, {3, -1});
       }},
      {"unsqueeze",
       "aten::unsqueeze",
       {4},
       none,
       [](OpModel&, const at::Tensor& x) { return x.unsqueeze(1) + x.unsqueeze(-1); }},
      // --- elementwise math, comparisons and activations (onnx_ops_elementwise.cpp) ---
      {"abs", "aten::abs", {9}, none, [](OpModel&, const at::Tensor& x) { return at::abs(x); }},
      {"clamp", "aten::clamp", {9}, none, [](OpModel&, const at::Tensor& x) { return at::clamp(x, -0.5, 0.7); }},
      {"clamp_one_bound",
       "aten::clamp",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::clamp(x, std::nullopt, 0.3); }},
      {"clamp_min", "aten::clamp_min", {9}, none, [](OpModel&, const at::Tensor& x) { return at::clamp_min(x, 0.1); }},
      {"div",
       "aten::div",
       {3, 4},
       [](OpModel& m) { m.add("d", at::rand({4}) + 0.5); },
       [](OpModel& m, const at::Tensor& x) { return x / m.get("d") / 2.0; }},
      {"elu", "aten::elu", {9}, none, [](OpModel&, const at::Tensor& x) { return at::elu(x, 0.7); }},
      {"eq",
       "aten::eq",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::where(at::eq(at::relu(x), 0.0), x * 3.0, x); }},
      {"erf", "aten::erf", {9}, none, [](OpModel&, const at::Tensor& x) { return at::erf(x); }},
      {"exp", "aten::exp", {9}, none, [](OpModel&, const at::Tensor& x) { return at::exp(x); }},
      {"ge", "aten::ge", {9}, none, [](OpModel&, const at::Tensor& x) { return at::where(x >= 0.1, x, -x); }},
      {"gt", "aten::gt", {3, 4}, none, [](OpModel&, const at::Tensor& x) { return at::where(x > x * x, x, 0.5); }},
      {"le", "aten::le", {9}, none, [](OpModel&, const at::Tensor& x) { return at::where(x <= 0.1, x, -x); }},
      {"leaky_relu",
       "aten::leaky_relu",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::leaky_relu(x, 0.2); }},
      {"leaky_relu_",
       "aten::leaky_relu_",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 2.0;
         return at::leaky_relu_(y, 0.1);
       }},
      {"log", "aten::log", {9}, none, [](OpModel&, const at::Tensor& x) { return at::log(x * x + 0.5); }},
      {"log_softmax",
       "aten::log_softmax",
       {3, 7},
       none,
       [](OpModel&, const at::Tensor& x) { return at::log_softmax(x, -1); }},
      {"lt", "aten::lt", {9}, none, [](OpModel&, const at::Tensor& x) { return at::where(x < 0.1, x, -x); }},
      {"maximum",
       "aten::maximum",
       {3, 4},
       [](OpModel& m) { m.add("b", at::randn({4})); },
       [](OpModel& m, const at::Tensor& x) { return at::maximum(x, m.get("b")); }},
      {"minimum",
       "aten::minimum",
       {3, 4},
       [](OpModel& m) { m.add("b", at::randn({4})); },
       [](OpModel& m, const at::Tensor& x) { return at::minimum(x, m.get("b")); }},
      {"ne",
       "aten::ne",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::where(at::ne(at::relu(x), 0.0), x * 3.0, x); }},
      {"reciprocal",
       "aten::reciprocal",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::reciprocal(x * x + 1.0); }},
      // Inputs past the threshold (20) take the identity, as ATen does.
      {"softplus",
       "aten::softplus",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::softplus(x * 30.0, 1.0, 20.0) + at::softplus(x, 2.0, 20.0); }},
      {"sqrt", "aten::sqrt", {9}, none, [](OpModel&, const at::Tensor& x) { return at::sqrt(x * x + 0.1); }},
      {"tanh", "aten::tanh", {9}, none, [](OpModel&, const at::Tensor& x) { return at::tanh(x); }},
      {"tanh_", "aten::tanh_", {9}, none, [](OpModel&, const at::Tensor& x) { return (x * 2.0).tanh_(); }},
      // --- reductions and selection (onnx_ops_reductions.cpp) ---
      {"amax", "aten::amax", {3, 4, 5}, none, [](OpModel&, const at::Tensor& x) { return x.amax({-1}, true); }},
      {"amin",
       "aten::amin",
       {3, 4, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.amin({1, 2});
       }},
      {"squeeze", "aten::squeeze", {1, 4, 1}, none, [](OpModel&, const at::Tensor& x) { return x.squeeze(1); }},
      {"squeeze_dims",
       "aten::squeeze",
       {1, 4, 1},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.squeeze({-1, 1, 2});
       }},
      {"stack",
       "aten::stack",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::stack({x, x * 2.0}, 1);
       }},
      {"stack_last",
       "aten::stack",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::stack({x, x * 2.0, x + 1.0}, -1);
       }},
      {"sum",
       "aten::sum",
       {3, 4, 5},
       none,
       [](OpModel&, const at::Tensor& x) { return x.sum({-1}) + x.sum({1}, true).sum({3}); }},
      {"where",
       "aten::where",
       {3, 4},
       [](OpModel& m) { m.add("b", at::randn({4})); },
       [](OpModel& m, const at::Tensor& x) { return at::where(x > m.get("b"), x, m.get("b")); }},
      // --- pooling, normalization, resampling, padding (onnx_ops_layers.cpp) ---
      {"avg_pool2d",
       "aten::avg_pool2d",
       {2, 9, 9},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false, true);
       }},
      {"avg_pool2d_ceil_exclude_pad",
       "aten::avg_pool2d",
       {2, 8, 8},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, false);
       }},
      {"constant_pad_nd",
       "aten::constant_pad_nd",
       {2, 5, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::constant_pad_nd(x, {1, 2, 0, 3}, 0.5);
       }},
      {"group_norm",
       "aten::group_norm",
       {6, 4, 3},
       [](OpModel& m) {
         m.add("w", at::randn({6}));
         m.add("b", at::randn({6}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::group_norm(x * 3.0 + 1.0, 3, m.get("w"), m.get("b"), 1e-5); }},
      {"reflection_pad1d",
       "aten::reflection_pad1d",
       {3, 6},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::reflection_pad1d(x, {2, 1});
       }},
      {"reflection_pad2d",
       "aten::reflection_pad2d",
       {2, 5, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::reflection_pad2d(x, {1, 2, 3, 1});
       }},
      {"replication_pad1d",
       "aten::replication_pad1d",
       {3, 6},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::replication_pad1d(x, {2, 1});
       }},
      {"replication_pad2d",
       "aten::replication_pad2d",
       {2, 5, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::replication_pad2d(x, {1, 2, 3, 1});
       }},
      {"upsample_nearest2d",
       "aten::upsample_nearest2d",
       {2, 3, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::upsample_nearest2d(x, {6, 10});
       }},
      // --- shape, indexing and selection (onnx_ops_indexing.cpp), rsub, norms ---
      {"__and__",
       "aten::__and__",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return at::where(at::__and__(x > -0.5, x < 0.5), x, x * 2.0); }},
      {"clone", "aten::clone", {9}, none, [](OpModel&, const at::Tensor& x) { return (x * 2.0).clone() + x; }},
      {"gather",
       "aten::gather",
       {3, 5},
       [](OpModel& m) {
         m.add("i", at::randint(0, 5, {3, 4}, at::kLong));
       },
       [](OpModel& m, const at::Tensor& x) {
         return at::gather(x, 2, m.get("i").unsqueeze(0).expand_as(x.narrow(2, 0, 4)));
       }},
      {"linalg_vector_norm",
       "aten::linalg_vector_norm",
       {3, 4, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::linalg_vector_norm(x, 2, {-1}, true) + at::linalg_vector_norm(x, 1, {1, 2}, true);
       }},
      {"masked_fill",
       "aten::masked_fill",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) { return x.masked_fill(x > 0.3, -1.5); }},
      {"masked_fill_",
       "aten::masked_fill_",
       {9},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 2.0;
         return y.masked_fill_(y < 0.0, 0.25);
       }},
      {"roll",
       "aten::roll",
       {4, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::roll(x, {1, -2}, {1, 2});
       }},
      {"rsub", "aten::rsub", {9}, none, [](OpModel&, const at::Tensor& x) { return at::rsub(x, 1.0, 2.0); }},
      {"split",
       "aten::split",
       {7, 2},
       none,
       [](OpModel&, const at::Tensor& x) {
         const auto parts = at::split(x, 3, 1);
         return parts[0].sum({1}, true) + parts[2];
       }},
      {"split_sizes",
       "aten::split",
       {7, 2},
       none,
       [](OpModel&, const at::Tensor& x) {
         const auto parts = x.split({2, 5}, 1);
         return parts[0].sum({1}, true) + parts[1].narrow(1, 0, 1);
       }},
      {"split_with_sizes",
       "aten::split_with_sizes",
       {7, 2},
       none,
       [](OpModel&, const at::Tensor& x) {
         const auto parts = at::split_with_sizes(x, {4, 3}, 1);
         return parts[0].sum({1}, true) + parts[1].narrow(1, 2, 1);
       }},
      {"view",
       "aten::view",
       {4, 6},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.view({-1, 6, 4});
       }},
      // Creation, shape arithmetic and indexing (export/onnx_ops_shapes.cpp).
      {"arange",
       "aten::arange",
       {5},
       none,
       [](OpModel&, const at::Tensor& x) { return x + at::arange(5, x.options()); }},
      {"arange_start_step",
       "aten::arange",
       {5},
       none,
       [](OpModel&, const at::Tensor& x) { return x * at::arange(1.0, 3.5, 0.5, x.options()); }},
      {"zeros",
       "aten::zeros",
       {5},
       none,
       [](OpModel&, const at::Tensor& x) { return x + at::zeros({5}, x.options()); }},
      {"ones",
       "aten::ones",
       {5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x - at::ones({1, 5}, x.options());
       }},
      {"full",
       "aten::full",
       {5},
       none,
       [](OpModel&, const at::Tensor& x) { return x * at::full({5}, 2.5, x.options()); }},
      {"new_zeros", "aten::new_zeros", {5}, none, [](OpModel&, const at::Tensor& x) { return x + x.new_zeros({5}); }},
      {"new_ones", "aten::new_ones", {5}, none, [](OpModel&, const at::Tensor& x) { return x + x.new_ones({5}); }},
      {"new_full",
       "aten::new_full",
       {5},
       none,
       [](OpModel&, const at::Tensor& x) { return x * x.new_full({5}, -3.0); }},
      {"fill_",
       "aten::fill_",
       {3, 2},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 2.0;
         y.fill_(1.5);
         return y + x;
       }},
      {"zero_",
       "aten::zero_",
       {3, 2},
       none,
       [](OpModel&, const at::Tensor& x) {
         at::Tensor y = x * 2.0;
         y.zero_();
         return y - x;
       }},
      {"expand",
       "aten::expand",
       {1, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.expand({-1, 3, 4}) * 2.0;
       }},
      {"expand_new_axis",
       "aten::expand",
       {3, 1},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.expand({2, x.size(0), 3, 5}).transpose(0, 1).flatten(1);
       }},
      {"repeat",
       "aten::repeat",
       {2, 3},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.repeat({1, 2, 3});
       }},
      {"repeat_new_axis",
       "aten::repeat",
       {2, 3},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.repeat({2, 1, 1, 2}).transpose(0, 1).flatten(1);
       }},
      {"flip_negative_dims",
       "aten::flip",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.flip({-1, 1});
       }},
      {"diff", "aten::diff", {5, 3}, none, [](OpModel&, const at::Tensor& x) { return at::diff(x, 1, 1); }},
      {"diff_twice_prepend_append",
       "aten::diff",
       {5, 3},
       [](OpModel& m) {
         m.add("before", at::randn({1, 1, 3}));
         m.add("after", at::randn({1, 2, 3}));
       },
       [](OpModel& m, const at::Tensor& x) {
         return at::diff(x.narrow(1, 0, 4) * 2.0, 2, -2, m.get("before").expand_as(x.narrow(1, 0, 1)),
                         m.get("after").expand_as(x.narrow(1, 0, 2)));
       }},
      {"index_select",
       "aten::index_select",
       {3, 4},
       [](OpModel& m) {
         m.add("i", at::tensor({2, 0, 3, 3, 1}));
       },
       [](OpModel& m, const at::Tensor& x) { return x.index_select(-1, m.get("i")); }},
      {"index",
       "aten::index",
       {5, 3},
       [](OpModel& m) {
         m.add("i", at::tensor({4, 0, 1, 1}).view({2, 2}));
       },
       [](OpModel& m, const at::Tensor& x) {
         c10::List<std::optional<at::Tensor>> indices;
         indices.push_back(std::nullopt);
         indices.push_back(m.get("i"));
         return at::index(x, indices);
       }},
      {"floor_divide",
       "aten::floor_divide",
       {6},
       none,
       [](OpModel&, const at::Tensor& x) { return at::floor_divide(x, 0.7); }},
      {"floor_divide_integers",
       "aten::floor_divide",
       {6},
       [](OpModel& m) {
         m.add("d", at::tensor({3, -3, 4, -4, 5, 2}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::floor_divide(x, m.get("d")); },
       [](const std::vector<std::int64_t>& shape) { return at::randint(-20, 20, shape, at::kLong); }},
      {"remainder", "aten::remainder", {6}, none, [](OpModel&, const at::Tensor& x) { return at::remainder(x, -0.7); }},
      {"remainder_integers",
       "aten::remainder",
       {6},
       [](OpModel& m) {
         m.add("d", at::tensor({3, -3, 4, -4, 5, 2}));
       },
       [](OpModel& m, const at::Tensor& x) { return at::remainder(x, m.get("d")); },
       [](const std::vector<std::int64_t>& shape) { return at::randint(-20, 20, shape, at::kLong); }},
      {"bmm", "aten::bmm", {3, 4}, none, [](OpModel&, const at::Tensor& x) { return at::bmm(x, x.transpose(1, 2)); }},
      {"baddbmm",
       "aten::baddbmm",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         const at::Tensor t = x.transpose(1, 2);
         return at::baddbmm(x.narrow(2, 0, 3), x, t, 0.5, 2.0);
       }},
      {"einsum",
       "aten::einsum",
       {3, 4},
       [](OpModel& m) {
         m.add("w", at::randn({4, 5}));
       },
       [](OpModel& m, const at::Tensor& x) {
         return at::einsum("bij,jk->bki", {x, m.get("w")});
       }},
      {"instance_norm",
       "aten::instance_norm",
       {3, 4, 5},
       [](OpModel& m) {
         m.add("w", at::randn({3}));
         m.add("b", at::randn({3}));
       },
       [](OpModel& m, const at::Tensor& x) {
         return at::instance_norm(x, m.get("w"), m.get("b"), {}, {}, true, 0.1, 1e-5, false);
       }},
      {"instance_norm_affine_free",
       "aten::instance_norm",
       {2, 6},
       none,
       [](OpModel&, const at::Tensor& x) { return at::instance_norm(x, {}, {}, {}, {}, true, 0.1, 1e-3, false); }},
      {"upsample_bicubic2d",
       "aten::upsample_bicubic2d",
       {2, 5, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::upsample_bicubic2d(x, {7, 9}, false);
       }},
      {"upsample_bicubic2d_align_corners",
       "aten::upsample_bicubic2d",
       {2, 5, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::upsample_bicubic2d(x, {3, 8}, true);
       }},
      {"pad_reflect",
       "aten::pad",
       {3, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::pad(x, {1, 2, 2, 1}, "reflect");
       }},
      {"pad_constant",
       "aten::pad",
       {3, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::pad(x, {0, 2}, "constant", 1.5);
       }},
      {"pad_replicate",
       "aten::pad",
       {2, 3, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::pad(x, {2, 1, 1, 0}, "replicate");
       }},
      {"native_multi_head_attention",
       "aten::_native_multi_head_attention",
       {5, 8},
       [](OpModel& m) {
         m.add("qkv_w", at::randn({24, 8}) * 0.3);
         m.add("qkv_b", at::randn({24}));
         m.add("proj_w", at::randn({8, 8}) * 0.3);
         m.add("proj_b", at::randn({8}));
       },
       [](OpModel& m, const at::Tensor& x) {
         return std::get<0>(at::_native_multi_head_attention(x, x, x, 8, 2, m.get("qkv_w"), m.get("qkv_b"),
                                                             m.get("proj_w"), m.get("proj_b"), {}, false, true, {}));
       }},
      {"native_multi_head_attention_weights",
       "aten::_native_multi_head_attention",
       {5, 8},
       [](OpModel& m) {
         m.add("qkv_w", at::randn({24, 8}) * 0.3);
         m.add("qkv_b", at::randn({24}));
         m.add("proj_w", at::randn({8, 8}) * 0.3);
         m.add("proj_b", at::randn({8}));
       },
       [](OpModel& m, const at::Tensor& x) {
         const at::Tensor memory = x * 0.5 + 1.0;  // key and value other than the query
         const auto [out, weights] =
             at::_native_multi_head_attention(x, memory, memory, 8, 4, m.get("qkv_w"), m.get("qkv_b"), m.get("proj_w"),
                                              m.get("proj_b"), {}, true, true, {});
         return at::cat({out, weights}, -1);
       }},
      // Broadcasting, non-contiguous inputs and negative dimensions through earlier entries.
      {"div_broadcast_noncontiguous",
       "aten::div",
       {4, 3},
       [](OpModel& m) { m.add("w", at::rand({4}) + 0.5); },
       [](OpModel& m, const at::Tensor& x) { return at::div(x.transpose(1, 2), m.get("w")); }},
      {"where_broadcast",
       "aten::where",
       {3, 4},
       [](OpModel& m) { m.add("w", at::randn({4})); },
       [](OpModel& m, const at::Tensor& x) { return at::where(x > 0.0, x, m.get("w")); }},
      {"cat_negative_dim_noncontiguous",
       "aten::cat",
       {3, 4},
       none,
       [](OpModel&, const at::Tensor& x) {
         return at::cat({x.transpose(1, 2), x.transpose(1, 2) * 2.0}, -1);
       }},
      {"sum_negative_dims_keepdim",
       "aten::sum",
       {3, 4, 5},
       none,
       [](OpModel&, const at::Tensor& x) {
         return x.permute({0, 3, 1, 2}).sum({-1, -3}, true);
       }},
  };
}

// The kinds of ATen node a traced graph holds.
std::set<std::string> traced_ops(const TracedModel& traced) {
  std::set<std::string> ops;
  for (const torch::jit::Node* node : traced.graph->nodes()) {
    if (node->kind().is_aten()) ops.insert(node->kind().toQualString());
  }
  return ops;
}

nlohmann::json run_reference(const fs::path& manifest) {
  const fs::path results = manifest.parent_path() / "results.json";
  const testing::CommandResult result = testing::run_command(
      testing::shell_quote(MIXT_PYTHON) + " " +
      testing::shell_quote((testing::source_dir() / "tests/support/export_reference.py").string()) + " " +
      testing::shell_quote(manifest.string()) + " " + testing::shell_quote(results.string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return nlohmann::json::parse(testing::read_file(results));
}

TEST(OnnxOpTable, EveryEntryHasACaseThatRecordsIt) {
  std::set<std::string> covered;
  for (const OpCase& c : op_cases()) covered.insert(c.op);
  for (const OnnxTranslation& entry : onnx_op_table()) EXPECT_EQ(covered.count(entry.aten), 1u) << entry.aten;
}

// docs/deploy.md's table is the op table written out, one row per entry.
TEST(OnnxOpTable, DeployMdListsEveryEntry) {
  std::string rows;
  for (const OnnxTranslation& entry : onnx_op_table()) {
    rows += "| `" + std::string(entry.aten) + "` | " + entry.onnx + " |\n";
  }
  EXPECT_EQ(testing::doc_table_rows("deploy.md", "## The op table"), rows) << "docs/deploy.md's table should read:\n"
                                                                           << rows;
}

TEST(OnnxOpTable, EveryEntryRunsInOnnxRuntimeLikeTheEagerOp) {
  TempDir dir;
  nlohmann::json manifest = nlohmann::json::array();
  for (const OpCase& c : op_cases()) {
    at::manual_seed(0);
    auto model = std::make_shared<OpModel>();
    c.init(*model);
    model->eval();
    const auto forward = [&](const at::Tensor& x) { return c.forward(*model, x); };
    std::vector<std::int64_t> shape{2};
    shape.insert(shape.end(), c.sample.begin(), c.sample.end());
    TracedModel traced = trace_model(*model, forward, c.input(shape));
    EXPECT_EQ(traced_ops(traced).count(c.op), 1u) << c.name << " records no " << c.op << ":\n" << *traced.graph;
    NamedTensors data;
    for (std::int64_t batch : {1, 3}) {
      shape[0] = batch;
      const at::Tensor x = c.input(shape);
      at::NoGradGuard no_grad;
      data.emplace_back("input_b" + std::to_string(batch), x);
      data.emplace_back("expected_b" + std::to_string(batch), forward(x).contiguous());
    }
    save_safetensors(dir.path() / (c.name + ".safetensors"), data);
    for (std::int64_t opset : {17, 21}) {
      const std::string name = c.name + "_opset" + std::to_string(opset);
      try {
        const std::string bytes = onnx_file_bytes(translate_to_onnx(traced, opset), opset, {{"case", c.name}});
        std::ofstream(dir.path() / (name + ".onnx"), std::ios::binary) << bytes;
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << ": " << e.what();
        continue;
      }
      manifest.push_back({{"name", name},
                          {"data", (dir.path() / (c.name + ".safetensors")).string()},
                          {"batches", {1, 3}},
                          {"onnx", (dir.path() / (name + ".onnx")).string()}});
    }
  }
  dir.write("manifest.json", manifest.dump());
  const nlohmann::json results = run_reference(dir.path() / "manifest.json");
  for (const auto& item : manifest) {
    const std::string name = item["name"];
    const nlohmann::json& r = results.at(name);
    ASSERT_FALSE(r.contains("error")) << name << ": " << r["error"];
    EXPECT_EQ(r["checker"], "ok") << name;
    ASSERT_TRUE(r["onnx_max_diff"].is_number()) << name << ": " << r["onnx_max_diff"];
    EXPECT_LE(r["onnx_max_diff"].get<double>(), 1e-5) << name;
    EXPECT_EQ(r["inputs"][0][0], "batch") << name;
  }
}

TEST(OnnxOpTable, AnOpWithoutAnEntryIsRefusedByNameAndOpset) {
  auto model = std::make_shared<OpModel>();
  const auto forward = [](const at::Tensor& x) { return at::erfinv(x * 0.5); };
  TracedModel traced = trace_model(*model, forward, at::randn({2, 4}));
  try {
    translate_to_onnx(traced, 17);
    FAIL() << "no refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_THAT(e.what(), HasSubstr("aten::erfinv"));
    EXPECT_THAT(e.what(), HasSubstr("at opset 17"));
    EXPECT_THAT(e.what(), HasSubstr("the op table has no entry for it"));
  }
}

}  // namespace
}  // namespace mixt
