// Where the training data stands in its epoch. Resuming mid-epoch, the order of an epoch
// depends only on seed and epoch, so going past the batches already trained on puts the
// run exactly where the interrupted one stopped: a dataset that can start part-way (image
// folders: seconds of JPEG decoding per batch) starts at the saved position, any other
// replays them through next_batch(). Each rank restarts at its own saved position.
#pragma once

#include <cstdint>
#include <vector>

#include "assembly/components.h"
#include "common/coordinator.h"

namespace mixt {

class DataCursor {
 public:
  DataCursor(Components& components, const Coordinator& coordinator)
      : components_(components), coordinator_(coordinator) {}

  // Every rank's position from a mid-epoch checkpoint (empty: replay), used by the next start().
  void resume_at(std::vector<std::int64_t> positions) { resume_positions_ = std::move(positions); }
  // Starts data.train's epoch `epoch` after `batches_done` of its micro-batches.
  void start(std::int64_t epoch, std::int64_t batches_done);
  // Every rank's data position, rank r's at [r] (empty when the dataset cannot start
  // part-way); a collective in data-parallel runs.
  std::vector<std::int64_t> positions() const;

 private:
  Components& components_;
  const Coordinator& coordinator_;
  std::vector<std::int64_t> resume_positions_;
};

}  // namespace mixt
