// A model whose forward uses what users' models use beyond the zoo — reflect padding, group
// norm, leaky_relu and tanh, average pooling, bilinear upsampling, a transposed convolution,
// exp/clamp/sum, abs/log/pow/sqrt/amax, stack and where — and a custom op of its own,
// exportable::swish (x * sigmoid(beta * x), registered with TORCH_LIBRARY), which the
// plugin translates to ONNX itself (mixt/onnx_translation.h). `mixt export` then writes
// the whole forward to ONNX.
#include <ATen/core/dispatch/Dispatcher.h>
#include <mixt/model.h>
#include <mixt/onnx_translation.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <torch/library.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

namespace {

at::Tensor swish_kernel(const at::Tensor& x, double beta) { return x * at::sigmoid(x * beta); }

// One kernel for every backend and autograd (CompositeImplicitAutograd): its backward is
// that of the ops inside, and the tracer records the op itself, not what it calls.
TORCH_LIBRARY(exportable, m) { m.def("swish(Tensor x, float beta) -> Tensor", TORCH_FN(swish_kernel)); }

at::Tensor swish(const at::Tensor& x, double beta) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("exportable::swish", "")
                             .typed<at::Tensor(const at::Tensor&, double)>();
  return op.call(x, beta);
}

// exportable::swish(x, beta) in ONNX: Mul(x, Sigmoid(Mul(x, beta))).
void swish_to_onnx(mixt::OnnxOp& op) {
  const mixt::OnnxValue x = op.tensor(0);
  const mixt::OnnxValue scaled = op.add("Mul", {x, op.scalar(op.double_(1), op.scalar_type(0))});
  op.set_output(op.add("Mul", {x, op.add("Sigmoid", {scaled})}));
}

class ExportableModel : public mixt::Model {
 public:
  ExportableModel(std::int64_t channels, std::int64_t width, std::int64_t classes)
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, width, 3)))),
        norm_(register_module("norm", torch::nn::GroupNorm(4, width))),
        conv2_(register_module("conv2",
                               torch::nn::Conv2d(torch::nn::Conv2dOptions(width, 2 * width, 3).stride(2).padding(1)))),
        up_(register_module(
            "up",
            torch::nn::ConvTranspose2d(
                torch::nn::ConvTranspose2dOptions(2 * width, 2 * width, 3).stride(2).padding(1).output_padding(1)))),
        head_(register_module("head", torch::nn::Linear(3 * 2 * width, classes))) {}

  // x: [N, C, H, W] with H and W divisible by 4.
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor h = conv1_->forward(at::reflection_pad2d(x, {1, 1, 1, 1}));
    h = at::avg_pool2d(at::leaky_relu(norm_->forward(h), 0.1), {2, 2});
    const at::Tensor small = at::tanh(conv2_->forward(h));  // [N, 2w, H/4, W/4]
    const at::Tensor wide = at::upsample_bilinear2d(small, {2 * small.size(2), 2 * small.size(3)}, false);
    h = swish(up_->forward(small) + wide, 1.5);
    const at::Tensor energy = at::sqrt(at::pow(at::abs(h), 2).sum({2, 3}) + 1e-6);
    const at::Tensor soft_max = at::log(at::exp(at::clamp(h, -5.0, 5.0)).sum({2, 3}));
    const at::Tensor peak = at::amax(h, {2, 3});
    const at::Tensor features = at::stack({energy, soft_max, peak}, 1);  // [N, 3, 2w]
    return head_->forward(at::where(features > 0, features, features * 0.5).flatten(1));
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::GroupNorm norm_;
  torch::nn::Conv2d conv2_;
  torch::nn::ConvTranspose2d up_;
  torch::nn::Linear head_;
};

struct ExportableOptions {
  std::int64_t width = 16;
  mixt::RecipeSection where;  // reads nothing: for errors that only the factory can find
};
using O = ExportableOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::width, "width", "channels of the first convolution (a multiple of 4: group norm's groups)",
             mixt::at_least(4))
        .recipe_section(&O::where);

std::shared_ptr<mixt::Model> make_model(const O& o, const mixt::ModelContext& context) {
  const auto& shape = context.sample_shape;
  if (shape.size() != 3 || shape[1] % 4 != 0 || shape[2] % 4 != 0) {
    o.where.fail("name", "exportable_model takes images [channels, height, width] whose sides divide by 4",
                 "use an image dataset");
  }
  if (o.width % 4 != 0) o.where.fail("width", "must be a multiple of 4 (group norm's 4 groups)");
  return std::make_shared<ExportableModel>(shape[0], o.width, context.num_classes);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_model("exportable_model", "a CNN of ops beyond the zoo's and a custom op", kOptions, make_model);
  registrar.add_onnx_translation("exportable::swish", "Mul+Sigmoid+Mul", swish_to_onnx);
}

}  // namespace

MIXT_PLUGIN("exportable_model", "0.1.0", register_components)
