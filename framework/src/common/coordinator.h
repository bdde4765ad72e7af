// What the trainer asks of the other processes of a run, if any: one interface with a
// single-process implementation (identities and no-ops) and the data-parallel one
// (distributed::DataParallel, over c10d), so the loop never asks "am I distributed?".
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mixt {

// What the ranks agreed on after an optimizer step.
struct StepAgreement {
  at::Tensor loss;      // the step's mean loss: over ranks, on the host, when `on_host`
  bool on_host = false; // the loss was read from the device to agree on it
};

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Before training: every rank starts from rank 0's parameters and buffers.
  virtual void broadcast_model(torch::nn::Module& model) const = 0;
  // Before each backward: `last` for the optimizer step's last micro-batch.
  virtual void prepare_backward(bool last) = 0;
  // After the last backward of a step, before the precision policy sees the gradients.
  virtual void average_gradients() = 0;
  // The step's `loss` (this rank's mean), agreed on by every rank. (Whether to stop is
  // agreed after the step's callbacks: StopDecider::after_step.)
  virtual StepAgreement agree_on_step(const at::Tensor& loss) const = 0;
  // Sums small per-rank numbers (sample counts, stop votes) over ranks.
  virtual std::vector<double> sum(const std::vector<double>& values) const = 0;
  virtual void barrier() const = 0;
  // Throws a runtime error when the parameters are not bit-identical on every rank; `hint`
  // replaces the default one (which names the precision policy's found-inf flag).
  virtual void check_in_sync(torch::nn::Module& model, const std::string& when,
                             const std::string& hint = {}) const = 0;
  // Whether this process may leave an evaluation by itself (no collective ends it).
  virtual bool may_stop_alone() const = 0;

  // Every rank's `value`, rank r's at [r] (a sum of one-hot slots: sum is the collective).
  std::vector<std::int64_t> gather(std::int64_t value) const {
    std::vector<double> slots(static_cast<std::size_t>(world_size()), 0.0);
    slots[static_cast<std::size_t>(rank())] = static_cast<double>(value);
    std::vector<std::int64_t> values;
    for (const double v : sum(slots)) values.push_back(static_cast<std::int64_t>(v));
    return values;
  }
  // Rank `from`'s `text` on every rank (two sums): a stop's reason, which every rank reports.
  std::string text_from(int from, const std::string& text) const {
    const std::int64_t length =
        gather(rank() == from ? static_cast<std::int64_t>(text.size()) : 0)[static_cast<std::size_t>(from)];
    if (length == 0) return {};
    std::vector<double> bytes(static_cast<std::size_t>(length), 0.0);
    if (rank() == from) {
      for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(text[i]);
    }
    std::string shared;
    for (const double b : sum(bytes)) shared += static_cast<char>(static_cast<unsigned char>(b));
    return shared;
  }
};

class SingleProcess final : public Coordinator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void broadcast_model(torch::nn::Module&) const override {}
  void prepare_backward(bool) override {}
  void average_gradients() override {}
  // Nothing is read from the device: the loss stays where it is.
  StepAgreement agree_on_step(const at::Tensor& loss) const override { return {loss, false}; }
  std::vector<double> sum(const std::vector<double>& values) const override { return values; }
  void barrier() const override {}
  void check_in_sync(torch::nn::Module&, const std::string&, const std::string&) const override {}
  bool may_stop_alone() const override { return true; }
};

}  // namespace mixt
