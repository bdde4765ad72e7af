#include "system_tags.h"

#include <mixt/version.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#ifndef MIXT_GIT_COMMIT
#define MIXT_GIT_COMMIT "unknown"
#endif

namespace mixt::mlflow {

Pairs system_tags(const std::filesystem::path& run_directory, const std::string& precision, int world_size) {
  char host[HOST_NAME_MAX + 1] = {0};
  gethostname(host, sizeof(host) - 1);
  Pairs tags = {{"mixt.version", mixt::version()},
                {"mixt.commit", MIXT_GIT_COMMIT},  // the source tree's commit when this plugin was configured
                {"mixt.host", host},
                {"mixt.world_size", std::to_string(world_size)},
                {"mixt.run_directory", std::filesystem::absolute(run_directory).string()},
                {"mlflow.source.name", "mixt"},
                {"mlflow.source.type", "LOCAL"}};
  if (!precision.empty()) tags.emplace_back("mixt.precision", precision);
  if (const char* user = std::getenv("USER")) tags.emplace_back("mlflow.user", user);
  return tags;
}

}  // namespace mixt::mlflow
