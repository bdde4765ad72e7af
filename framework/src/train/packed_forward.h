// The model's forward pass for a batch whose targets may carry the positions of packed rows
// (mixt/packed_sequences.h): the task says whether they do, the model then attends within
// each sequence. Training and evaluation both feed the model through here.
#pragma once

#include <ATen/ATen.h>

#include "assembly/components.h"
#include "mixt/error.h"
#include "mixt/linear_head.h"
#include "mixt/packed_sequences.h"

namespace mixt {

// The positions `targets` carry (the task's PackedTargets), or undefined for unpacked rows.
inline at::Tensor packed_positions(const Components& c, const at::Tensor& targets) {
  const auto* packed = dynamic_cast<const PackedTargets*>(c.task.get());
  return packed != nullptr ? packed->positions(targets) : at::Tensor();
}

// The model that takes `positions`; a recipe error when it cannot.
inline PackedModel& packed_model(const Components& c) {
  auto* model = dynamic_cast<PackedModel*>(c.model.get());
  if (model == nullptr) {
    throw Error(ErrorKind::recipe,
                "the data's rows are packed (several samples one after another), and the model cannot keep "
                "attention inside each: it does not derive from mixt::PackedModel",
                {}, {}, "use a model that does (llama), or set the dataset's packing: false");
  }
  return *model;
}

// forward(inputs), or forward_packed(inputs, positions) when `positions` is defined.
inline at::Tensor forward_batch(const Components& c, const at::Tensor& inputs, const at::Tensor& positions) {
  return positions.defined() ? packed_model(c).forward_packed(inputs, positions) : c.model->forward(inputs);
}

// LinearHead::features(inputs), or features_packed(inputs, positions) when `positions` is defined.
inline at::Tensor features_batch(const Components& c, const at::Tensor& inputs, const at::Tensor& positions) {
  return positions.defined() ? packed_model(c).features_packed(inputs, positions)
                             : dynamic_cast<LinearHead&>(*c.model).features(inputs);
}

}  // namespace mixt
