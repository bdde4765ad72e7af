// The container image mixt runs in: the Containerfile sets MIXT_CONTAINER_IMAGE to the
// image's name, version and source revision, so `mixt --version`, a run's recipe.yaml and
// bench.json can say where a result came from. Empty outside the image.
#pragma once

#include <cstdlib>
#include <string>

namespace mixt {

inline std::string container_image() {
  const char* image = std::getenv("MIXT_CONTAINER_IMAGE");
  return image ? image : "";
}

}  // namespace mixt
