// The tags every mixt run carries in MLflow: mixt's version and commit, the host, the world
// size, the precision policy, the run directory.
#pragma once

#include <filesystem>
#include <string>

#include "run_files.h"

namespace mixt::mlflow {

Pairs system_tags(const std::filesystem::path& run_directory, const std::string& precision, int world_size);

}  // namespace mixt::mlflow
