#include "mixt/dataset.h"
#include "mixt/decodes_files.h"
#include "mixt/padded_shards.h"

namespace mixt {

// Defined here, once: the host's dynamic_cast from a plugin's Dataset needs one type_info.
NamedClasses::~NamedClasses() = default;
ResumesMidEpoch::~ResumesMidEpoch() = default;
CountsBadSamples::~CountsBadSamples() = default;
DecodesFiles::~DecodesFiles() = default;
PadsShards::~PadsShards() = default;

std::vector<std::string> class_names_of(const Dataset& dataset) {
  const auto* named = dynamic_cast<const NamedClasses*>(&dataset);
  return named ? named->class_names() : std::vector<std::string>{};
}

const DecodesFiles* file_decoder_of(const Dataset& dataset) { return dynamic_cast<const DecodesFiles*>(&dataset); }

std::int64_t own_samples_of(const Dataset& dataset) {
  const auto* padded = dynamic_cast<const PadsShards*>(&dataset);
  return padded ? padded->own_samples() : dataset.size();
}

std::int64_t bad_samples_of(const Dataset* dataset) {
  const auto* counting = dynamic_cast<const CountsBadSamples*>(dataset);
  return counting ? counting->bad_samples() : 0;
}

}  // namespace mixt
