#include "distributed/shard_manifest.h"

#include <sstream>
#include <stdexcept>

namespace mixt::distributed {

ShardManifest parse_shard_manifest(const std::string& text) {
  ShardManifest manifest;
  std::istringstream lines(text);
  std::string line;
  if (!std::getline(lines, line) || line.rfind("sharding ", 0) != 0) {
    throw std::invalid_argument("its optimizer manifest does not start with 'sharding <mode>'");
  }
  if (!std::getline(lines, line) || line.rfind("world_size ", 0) != 0) {
    throw std::invalid_argument("its optimizer manifest has no 'world_size <N>' line");
  }
  try {
    manifest.world_size = std::stoi(line.substr(std::string("world_size ").size()));
  } catch (const std::exception&) {
    manifest.world_size = 0;
  }
  if (manifest.world_size < 1) throw std::invalid_argument("its optimizer manifest's '" + line + "' is not a count");
  while (std::getline(lines, line)) {
    if (!line.empty()) manifest.tensors[line.substr(0, line.find(' '))] = line;
  }
  return manifest;
}

}  // namespace mixt::distributed
