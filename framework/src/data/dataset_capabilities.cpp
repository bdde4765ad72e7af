#include "mixt/dataset.h"
#include "mixt/decodes_files.h"
#include "mixt/padded_shards.h"

namespace mixt {

std::vector<std::string> class_names_of(Dataset& dataset) {
  const NamedClasses* named = dataset.capabilities().named_classes;
  return named ? named->class_names() : std::vector<std::string>{};
}

DecodesFiles* file_decoder_of(Dataset& dataset) { return dataset.capabilities().decodes_files; }

std::int64_t own_samples_of(Dataset& dataset) {
  const PadsShards* padded = dataset.capabilities().pads_shards;
  return padded ? padded->own_samples() : dataset.size();
}

std::int64_t bad_samples_of(Dataset* dataset) {
  const CountsBadSamples* counting = dataset ? dataset->capabilities().counts_bad_samples : nullptr;
  return counting ? counting->bad_samples() : 0;
}

std::string preprocessing_of(Dataset& dataset) {
  const DescribesPreprocessing* describing = dataset.capabilities().describes_preprocessing;
  return describing ? describing->preprocessing() : std::string();
}

}  // namespace mixt
