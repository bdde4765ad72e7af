// A sharded checkpoint's manifest (ShardedOptimizer::manifest): "sharding <mode>",
// "world_size <N>", then one describe_tensor line per tensor ("<name> [sizes] <dtype>"). The
// mode is not kept: every mode cuts the same chunks, so a checkpoint resumes under any of
// them. Its own file: a reader of checkpoint bytes, fuzzed alone (fuzz/checkpoint_fuzz.cpp).
#pragma once

#include <map>
#include <string>

namespace mixt::distributed {

struct ShardManifest {
  int world_size = 0;
  std::map<std::string, std::string> tensors;  // name -> its whole line
};
// Throws std::invalid_argument when the text is not a manifest.
ShardManifest parse_shard_manifest(const std::string& text);

}  // namespace mixt::distributed
