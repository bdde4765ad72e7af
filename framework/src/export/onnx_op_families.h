// The op table's families beyond the zoo's core (export/onnx_op_table.cpp), one file each:
// each returns its translations, which onnx_op_table() merges and sorts.
#pragma once

#include <vector>

#include "export/onnx_op_table.h"

namespace mixt {

// Elementwise math, comparisons and activations: tanh, exp, log, sqrt, abs, erf,
// reciprocal, div, maximum, minimum, clamp, gt/lt/ge/le/eq/ne, leaky_relu, elu, softplus,
// log_softmax.
std::vector<OnnxTranslation> elementwise_translations();
// Reductions and selection: sum, amax, amin, where, stack, squeeze.
std::vector<OnnxTranslation> reduction_translations();
// Pooling, normalization, resampling and padding: avg_pool2d, group_norm,
// upsample_nearest2d, constant/reflection/replication padding.
std::vector<OnnxTranslation> layer_translations();
// Shape, indexing and selection: clone, masked_fill, gather, split, roll, and (booleans).
std::vector<OnnxTranslation> indexing_translations();

}  // namespace mixt
