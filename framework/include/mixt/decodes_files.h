// mixt/decodes_files.h — an optional dataset capability: one input from a file the user
// names, made as the dataset makes its own samples (the same decoder, the same transforms).
// `mixt predict --image` uses it, so the mixt program needs no image library of its own.
//
// mixt predict builds the dataset of the recipe section it decodes with (data.val's) with
// DatasetContext::split == kPredictSplit. Such a dataset is asked for nothing but
// sample_shape(), its class names (NamedClasses) and decode_file(): its data (a root
// folder, a download) may be absent, and it may then hold no samples. A dataset that does
// not know this split sees a split other than "train", and takes its evaluation defaults.
// A dataset that has one derives from DecodesFiles too and points at it from capabilities().
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "mixt/dataset.h"

namespace mixt {

inline constexpr const char* kPredictSplit = "predict";

class DecodesFiles {
 public:
  virtual ~DecodesFiles() = default;
  // Whether a file found in a folder is one the dataset would take (its extensions); the
  // others are passed over in silence. A file named on its own is always tried.
  virtual bool takes_file(const std::string& path) const = 0;
  // One input of sample_shape(), as the dataset's evaluation would see it. Throws a
  // mixt::Error naming the file and saying why it cannot (unreadable, not an image,
  // corrupt, truncated, too big).
  virtual at::Tensor decode_file(const std::string& path) const = 0;
};

// The dataset's file decoder, or null when it has none.
DecodesFiles* file_decoder_of(Dataset& dataset);

}  // namespace mixt
