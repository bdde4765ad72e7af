// mixt/packed_sequences.h — rows that hold several sequences one after another ("packing",
// as torchtune's PackedDataset and transformers' DataCollatorWithFlattening lay them out),
// with each token's position within its own sequence beside it. Since ABI 6.10.
//
// The positions travel in the batch's targets, whose layout is the task's to define (a
// TensorSampleSource's target may have any shape), so that mixt::Batch keeps its two tensors
// and every older plugin its layout: a task that can carry them derives from PackedTargets
// besides mixt::Task, a model that can attend within each sequence from PackedModel besides
// mixt::Model. The host finds both with a dynamic_cast (their type information lives in
// libmixt) and, for a batch whose targets carry positions, calls forward_packed() (or
// features_packed() for the fused head loss) instead of forward() (features()); the task's
// loss and evaluation read the targets as they always did. A dataset derives from PacksRows
// to say its rows are packed; such data, or a packed batch, given to a model without
// PackedModel is a recipe error.
//
//   causal_lm (plugins/tasks/causal_lm): targets [batch, 2, time], the next tokens (-100 for
//             none), then the positions; [batch, time] as before for unpacked rows.
//   llama (models/llama): rotary positions from `positions`, attention block-diagonal and
//             causal within each sequence.
#pragma once

#include <ATen/ATen.h>

namespace mixt {

class PackedModel {
 public:
  virtual ~PackedModel();
  // forward(inputs) for rows of several sequences: `positions` int64 [batch, time] holds each
  // token's position within its own sequence, 0 at its first token (a sequence starts wherever
  // the position is 0, as transformers' position_ids mark packed sequences); a token sees only
  // the tokens of its own sequence up to itself. Each sequence's outputs are those forward()
  // gives it alone, up to float rounding; a row whose positions count 0, 1, 2, ... through is
  // forward()'s.
  virtual at::Tensor forward_packed(const at::Tensor& inputs, const at::Tensor& positions) = 0;
  // LinearHead::features(inputs) likewise (mixt/linear_head.h); a model without a linear head
  // may fail it.
  virtual at::Tensor features_packed(const at::Tensor& inputs, const at::Tensor& positions) = 0;
};

// A dataset whose rows may hold packed samples says whether they do, so that a model without
// PackedModel is a recipe error when the run is built, before anything is written.
class PacksRows {
 public:
  virtual ~PacksRows();
  virtual bool packs_rows() const = 0;
};

class PackedTargets {
 public:
  virtual ~PackedTargets();
  // The positions that a batch's `targets` (on the device) carry for the model, int64 [batch,
  // time]; undefined when they carry none (rows of one sequence each).
  virtual at::Tensor positions(const at::Tensor& targets) const = 0;
};

}  // namespace mixt
