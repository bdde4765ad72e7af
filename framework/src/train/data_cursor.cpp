#include "train/data_cursor.h"

#include "mixt/dataset.h"

namespace mixt {

void DataCursor::start(std::int64_t epoch, std::int64_t batches_done) {
  Dataset& data = *components_.train;
  ResumesMidEpoch* resumable = data.capabilities().resumes_mid_epoch;
  const bool saved = resume_positions_.size() == static_cast<std::size_t>(coordinator_.world_size());
  if (batches_done > 0 && resumable && saved) {
    resumable->start_epoch_at(epoch, resume_positions_[static_cast<std::size_t>(coordinator_.rank())]);
  } else {
    data.start_epoch(epoch);
    for (std::int64_t skip = 0; skip < batches_done; ++skip) data.next_batch();
  }
  resume_positions_.clear();
}

std::vector<std::int64_t> DataCursor::positions() const {
  const ResumesMidEpoch* resumable = components_.train->capabilities().resumes_mid_epoch;
  return resumable ? coordinator_.gather(resumable->position()) : std::vector<std::int64_t>{};
}

}  // namespace mixt
