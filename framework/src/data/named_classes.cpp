#include "mixt/dataset.h"

namespace mixt {

NamedClasses::~NamedClasses() = default;

std::vector<std::string> class_names_of(const Dataset& dataset) {
  const auto* named = dynamic_cast<const NamedClasses*>(&dataset);
  return named ? named->class_names() : std::vector<std::string>{};
}

}  // namespace mixt
