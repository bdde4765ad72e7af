// One conversation of the instruct dataset as tokens, and the two ways its rows are laid out:
// one conversation a row (padded), or several packed one after another (packing: true).
#pragma once

#include <mixt/helpers/data_loader.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mixt::datasets::instruct {

inline constexpr std::int64_t kIgnore = -100;  // causal_lm's ignore_index (PyTorch's, TRL's, torchtune's)

// One conversation's tokens, cut to context + 1, and which of them are trained.
struct Conversation {
  std::vector<std::int64_t> ids;
  std::vector<bool> trained;
  std::int64_t line = 0;
  // Its (input, target) pairs: input t is token t, target t token t + 1 (or -100).
  std::int64_t pairs() const { return static_cast<std::int64_t>(ids.size()) - 1; }
};

// Writes `c`'s pairs into `input` and `target` (1-D accessors) from `at`; returns the count.
inline std::int64_t write_pairs(const Conversation& c, std::int64_t at, at::TensorAccessor<std::int64_t, 1> input,
                                at::TensorAccessor<std::int64_t, 1> target) {
  for (std::int64_t t = 0; t < c.pairs(); ++t) {
    input[at + t] = c.ids[static_cast<std::size_t>(t)];
    if (c.trained[static_cast<std::size_t>(t + 1)]) target[at + t] = c.ids[static_cast<std::size_t>(t + 1)];
  }
  return c.pairs();
}

// A row a conversation: input t token t, target t token t + 1 when it is trained, else -100;
// padded to context (input: the pad id, target: -100).
class Conversations : public TensorSampleSource {
 public:
  Conversations(std::vector<Conversation> conversations, std::int64_t context, std::int64_t pad, std::string file)
      : conversations_(std::move(conversations)), context_(context), pad_(pad), file_(std::move(file)) {}

  std::int64_t size() const override { return static_cast<std::int64_t>(conversations_.size()); }
  std::string sample_name(std::int64_t index) const override {
    return file_ + ":" + std::to_string(conversations_[static_cast<std::size_t>(index)].line);
  }
  TensorSample load_tensor_sample(std::int64_t index, SampleRng& /*rng*/) const override {
    at::Tensor input = at::full({context_}, pad_, at::kLong);
    at::Tensor target = at::full({context_}, kIgnore, at::kLong);
    write_pairs(conversations_[static_cast<std::size_t>(index)], 0, input.accessor<std::int64_t, 1>(),
                target.accessor<std::int64_t, 1>());
    return {input, target};
  }

 private:
  std::vector<Conversation> conversations_;
  std::int64_t context_;
  std::int64_t pad_;
  std::string file_;
};

// Rows of several conversations, as torchtune's PackedDataset fills them: whole
// conversations' pairs one after another, greedily in order (one that does not fit the rest
// of a row starts the next), the rest padded. The target is [2, context]: the next tokens (-100
// for the prompt, the padding, and so never across a border: each conversation's last token
// is no input), then each token's position within its conversation (the padding continuing
// the last one's), for the model to attend within each (mixt/packed_sequences.h).
class PackedConversations : public TensorSampleSource {
 public:
  PackedConversations(std::vector<Conversation> conversations, std::int64_t context, std::int64_t pad, std::string file)
      : conversations_(std::move(conversations)), context_(context), pad_(pad), file_(std::move(file)) {
    std::int64_t used = context_;  // no row yet
    for (std::size_t i = 0; i < conversations_.size(); ++i) {
      const std::int64_t pairs = conversations_[i].pairs();
      if (used + pairs > context_) {
        rows_.emplace_back();
        used = 0;
      }
      rows_.back().push_back(i);
      used += pairs;
    }
  }

  std::int64_t size() const override { return static_cast<std::int64_t>(rows_.size()); }
  // file:line,line,... of the row's conversations.
  std::string sample_name(std::int64_t index) const override {
    std::string name = file_ + ":";
    for (const std::size_t i : rows_[static_cast<std::size_t>(index)]) {
      name += (name.back() == ':' ? "" : ",") + std::to_string(conversations_[i].line);
    }
    return name;
  }
  TensorSample load_tensor_sample(std::int64_t index, SampleRng& /*rng*/) const override {
    at::Tensor input = at::full({context_}, pad_, at::kLong);
    at::Tensor target = at::full({2, context_}, kIgnore, at::kLong);
    auto positions = target.accessor<std::int64_t, 2>()[1];
    std::int64_t at = 0;
    std::int64_t last = 0;
    for (const std::size_t i : rows_[static_cast<std::size_t>(index)]) {
      const std::int64_t pairs =
          write_pairs(conversations_[i], at, input.accessor<std::int64_t, 1>(), target.accessor<std::int64_t, 2>()[0]);
      for (std::int64_t t = 0; t < pairs; ++t) positions[at + t] = t;
      at += pairs;
      last = pairs;
    }
    for (std::int64_t t = at; t < context_; ++t) positions[t] = last + (t - at);
    return {input, target};
  }
  std::int64_t conversations() const { return static_cast<std::int64_t>(conversations_.size()); }

 private:
  std::vector<Conversation> conversations_;
  std::vector<std::vector<std::size_t>> rows_;
  std::int64_t context_;
  std::int64_t pad_;
  std::string file_;
};

}  // namespace mixt::datasets::instruct
