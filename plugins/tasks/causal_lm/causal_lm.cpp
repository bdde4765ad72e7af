// tasks/causal_lm — causal language modelling, as nanoGPT and llm.c train GPT-2: token ids
// [batch, time] in, logits [batch, time, vocab] out, each position predicting the next
// token (the dataset gives targets already shifted: tokens 1..T of each window of T + 1).
// The loss is the mean cross-entropy over every position (F.cross_entropy over the
// flattened [batch * time, vocab], with its option label_smoothing); an evaluation reports it
// per token and its exponential, the perplexity.
//
// Packed rows (mixt/packed_sequences.h: several samples one after another, an instruct
// dataset's `packing: true`) come with targets [batch, 2, time]: the next tokens, then each
// token's position within its sample, which the host hands the model; the loss and the
// evaluation read the next tokens alone, so a packed batch's loss is the mean over the same
// trained tokens as the same samples' unpacked.
//
// With a model that offers its head (mixt/linear_head.h: gpt2, llama), training computes the
// head and the loss together in chunks of positions (fused_loss, on by default): the
// [batch * time, vocab] logits, their softmax and their gradient never exist whole.
#include <mixt/helpers/fused_linear_cross_entropy.h>
#include <mixt/linear_head.h>
#include <mixt/packed_sequences.h>
#include <mixt/plugin.h>
#include <mixt/task.h>

#include <cmath>
#include <optional>

namespace {

constexpr std::int64_t kIgnoreIndex = -100;  // PyTorch's: targets equal to it count for nothing

// The next tokens of targets [batch, time], or of packed rows' [batch, 2, time].
at::Tensor next_tokens(const at::Tensor& targets) {
  return targets.dim() == 3 ? targets.select(1, 0).contiguous() : targets;
}

// Loss summed over tokens, tokens: float64 on the device.
class NextTokenScore : public mixt::TaskScore {
 public:
  void add(const at::Tensor& logits, const at::Tensor& all_targets) override {
    const at::Tensor targets = next_tokens(all_targets);
    const at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(at::kFloat),
                                                   targets.reshape({-1}), {}, at::Reduction::Sum);
    // Targets equal to -100 (a prompt token of instruction data) count for nothing, as in the loss.
    const at::Tensor counted = targets.ne(kIgnoreIndex).sum().to(at::kDouble);
    const at::Tensor batch = at::stack({loss.to(at::kDouble), counted});
    sums_ = sums_.defined() ? sums_ + batch : batch;
  }
  std::vector<double> totals() const override {
    if (!sums_.defined()) return {0, 0};
    const at::Tensor host = sums_.cpu().contiguous();
    return {host.data_ptr<double>(), host.data_ptr<double>() + 2};
  }
  double loss(const std::vector<double>& t) const override { return t[0] / t[1]; }
  std::vector<mixt::Figure> finish(const std::vector<double>& t) const override {
    return {{"perplexity", "perplexity", false, false, std::exp(t[0] / t[1])}};
  }

 private:
  at::Tensor sums_;
};

struct CausalLmOptions {
  double label_smoothing = 0.0;
  bool fused_loss = true;
  std::optional<std::int64_t> loss_chunk;
};

class CausalLm : public mixt::Task, public mixt::HeadLoss, public mixt::PackedTargets {
 public:
  explicit CausalLm(const CausalLmOptions& o) : options_(o) {}

  at::Tensor blank_inputs(const std::vector<std::int64_t>& shape, at::Device device) const override {
    return at::zeros(shape, at::TensorOptions().dtype(at::kLong).device(device));
  }
  std::string output_problem(at::IntArrayRef output, at::IntArrayRef input, std::int64_t vocab) const override {
    const bool fits = input.size() == 2 && output.size() == 3 && output[0] == input[0] && output[1] == input[1] &&
                      output[2] == vocab;
    if (fits) return "";
    if (input.size() != 2) {
      return "cannot be scored: causal_lm takes samples of token ids [time], and the training data's are " +
             c10::str(input.slice(1)) + " (a tokens or text dataset gives them)";
    }
    return "has shape " + c10::str(output) + ", expected [" + std::to_string(input[0]) + ", " +
           std::to_string(input[1]) + ", " + std::to_string(vocab) +
           "]: one row of logits per position, one logit per token of the data's vocabulary (" +
           std::to_string(vocab) + ")";
  }
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) const override {
    return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), next_tokens(targets).reshape({-1}), {},
                                  at::Reduction::Mean, kIgnoreIndex, options_.label_smoothing);
  }
  bool fuses_head() const override { return options_.fused_loss; }
  at::Tensor head_loss(const at::Tensor& features, const mixt::HeadMap& head,
                       const at::Tensor& targets) const override {
    mixt::FusedCrossEntropyOptions fused;
    fused.label_smoothing = options_.label_smoothing;
    fused.chunk_rows = options_.loss_chunk;
    return mixt::fused_linear_cross_entropy(features, head.weight, head.bias, next_tokens(targets), fused);
  }
  at::Tensor positions(const at::Tensor& targets) const override {
    return targets.dim() == 3 ? targets.select(1, 1) : at::Tensor();
  }
  std::vector<mixt::Figure> figures() const override { return {{"perplexity", "perplexity", false, false}}; }
  std::unique_ptr<mixt::TaskScore> start_evaluation(bool /*confusion: none over a vocabulary*/) const override {
    return std::make_unique<NextTokenScore>();
  }
  // Every position of a window is a prediction: rates in tokens, as llm.c and nanoGPT give them.
  std::optional<mixt::Throughput> throughput(at::IntArrayRef sample_shape) const override {
    std::int64_t tokens = 1;
    for (std::int64_t d : sample_shape) tokens *= d;
    return mixt::Throughput{"tokens", tokens};
  }
  std::string describe_classes(std::int64_t vocabulary) const override {
    return "vocabulary " + std::to_string(vocabulary);
  }
  // The sequence stays open up to the context the model was built for.
  mixt::ExportedInterface exported() const override {
    return {{{1, 1, "time", "sequence length"}},
            "token ids",
            "token ids, int64, below the vocabulary",
            "next-token logits at every position"};
  }
  bool predicts_next_token() const override { return true; }

 private:
  CausalLmOptions options_;
};

using O = CausalLmOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::label_smoothing, "label_smoothing",
             "cross-entropy label smoothing in [0, 1), as `torch.nn.CrossEntropyLoss`",
             mixt::at_least(0) && mixt::below(1))
        .add(&O::fused_loss, "fused_loss",
             "train with the head and the loss computed together in chunks of positions, never holding the whole "
             "logits (models with a linear head: gpt2, llama); equal to the plain loss up to float rounding")
        .contextual(&O::loss_chunk, "loss_chunk", "ceil(vocab / width) chunks, at least 256 positions each",
                    "positions per chunk of the fused loss", mixt::at_least(1));

void register_components(mixt::Registrar& registrar) {
  registrar.add_task("causal_lm",
                     "next-token prediction: cross-entropy over [batch, time, vocab] logits; evaluation loss per "
                     "token and perplexity",
                     kOptions, [](const O& o, const mixt::TaskContext&) { return std::make_unique<CausalLm>(o); });
}

}  // namespace

MIXT_PLUGIN("task_causal_lm", "2.2.0", register_components)
