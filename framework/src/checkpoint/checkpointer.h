// Checkpoints of a run: what they hold (the components' states, the TrainState, the CPU
// RNG, the data order a mid-epoch position counts in, the callbacks' states), the epoch
// files with their `last` link and rotation, and reading one back into a run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "assembly/components.h"
#include "assembly/run_facts.h"
#include "assembly/trainer_options.h"
#include "common/coordinator.h"
#include "common/run_directory.h"
#include "mixt/train_state.h"

namespace mixt {

class Checkpointer {
 public:
  Checkpointer(Components& components, const RunFacts& facts, const TrainerOptions& options, TrainState& state,
               const Coordinator& coordinator);

  // Called before every save: brings TrainState's counts kept on the device up to date.
  void settle_before_saving_with(std::function<void()> settle) { settle_before_saving_ = std::move(settle); }
  // `data_positions`: every rank's ResumesMidEpoch::position() when saving mid-epoch;
  // empty at an epoch's end or for datasets that cannot start part-way.
  void save(const std::filesystem::path& file, const std::vector<std::int64_t>& data_positions = {}) const;
  // After epoch state.epoch: checkpoints/epoch-NNNN (saying "start at the next epoch"),
  // `last` pointing at it, the newest trainer.keep_checkpoints kept, `interrupted` removed.
  std::filesystem::path save_epoch_end(const RunDirectory& run) const;
  // Rewrites `file`, the checkpoint save() wrote last, with the callbacks' state as it is
  // now (after the epoch's evaluation and on_epoch_end) and everything else as it was
  // saved; atomically, and only when a callback's state changed. Returns whether it wrote.
  bool update_callback_state(const std::filesystem::path& file) const;

  struct Resumed {
    std::filesystem::path file;                // the checkpoint read
    std::vector<std::int64_t> data_positions;  // each rank's, when saved mid-epoch
  };
  // Restores the components and the TrainState from a checkpoint written by a run of the
  // same recipe; a recipe error when it does not fit. Writes nothing. `check_data_order`:
  // whether a mid-epoch checkpoint must have this run's data order (`mixt check` outside
  // torchrun does not know the number of ranks the run will have; nor, for a recipe with
  // trainer.distributed.sharding, the ranks' optimizer shards, which it then leaves unread).
  Resumed resume(const std::filesystem::path& checkpoint, bool check_data_order = true);

  // data.train's dataset, samples and batches per rank, ranks, seed and accumulation: what
  // a mid-epoch position means. The same text means the same epoch order, batch for batch.
  std::string data_order() const;

 private:
  // What save() wrote besides the callbacks' state, for update_callback_state.
  struct Saved {
    std::filesystem::path file;
    std::vector<std::int64_t> data_positions;
    TrainState state;
    at::Tensor rng;
    std::string callback_bytes;  // the callbacks' archive as written
  };
  void write(const Saved& saved, torch::serialize::OutputArchive& callbacks) const;
  // Every callback's state, by NamedCallback::key(), and the archive's bytes.
  torch::serialize::OutputArchive callback_archive(std::string& bytes) const;
  // A line when the checkpoint's callbacks and the recipe's differ (reordered is fine).
  void load_callback_state(torch::serialize::InputArchive& archive, const std::filesystem::path& file);

  mutable std::optional<Saved> last_saved_;
  std::function<void()> settle_before_saving_;
  Components& components_;
  const RunFacts& facts_;
  const TrainerOptions& options_;
  TrainState& state_;
  const Coordinator& coordinator_;
};

// "epoch-0003" for the checkpoint written after epoch 3.
std::string epoch_checkpoint_name(std::int64_t epochs_done);

}  // namespace mixt
