// mixt/dataset.h — the dataset interface.
//
// A dataset delivers an epoch as a sequence of batches. The order of an epoch must depend
// only on the seed, the epoch and the shard, never on timing: that is what makes runs
// reproducible and resumable mid-epoch.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mixt {

struct Batch {
  at::Tensor inputs;   // float, N x C x H x W (or whatever the model expects)
  at::Tensor targets;  // int64 class indices, N; or one tensor per sample stacked, N x ... (a
                       // mixt::TensorSampleSource's: a mask per image, [N, H, W])
};

class NamedClasses;
class ResumesMidEpoch;
class CountsBadSamples;
class DescribesPreprocessing;
class DecodesFiles;  // mixt/decodes_files.h
class PadsShards;    // mixt/padded_shards.h

// What a dataset can do beyond the interface below: each an optional interface it also
// derives from, pointing at itself; null for what it cannot. One query, so the host asks
// the dataset rather than probing its type across a library boundary.
struct DatasetCapabilities {
  NamedClasses* named_classes = nullptr;
  ResumesMidEpoch* resumes_mid_epoch = nullptr;
  CountsBadSamples* counts_bad_samples = nullptr;
  DescribesPreprocessing* describes_preprocessing = nullptr;
  DecodesFiles* decodes_files = nullptr;
  PadsShards* pads_shards = nullptr;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual std::int64_t size() const = 0;                      // samples in this shard
  virtual std::int64_t num_classes() const = 0;
  virtual std::vector<std::int64_t> sample_shape() const = 0;  // one input, e.g. {1, 28, 28}
  virtual std::int64_t batches_per_epoch() const = 0;

  // Starts epoch `epoch` (0-based): reshuffles if the dataset shuffles.
  virtual void start_epoch(std::int64_t epoch) = 0;
  // The next batch of the current epoch, or nothing when the epoch is over.
  virtual std::optional<Batch> next_batch() = 0;

  // The optional interfaces below that this dataset implements. None by default.
  virtual DatasetCapabilities capabilities() { return {}; }
};

// For a dataset whose classes have names (class folders, a label file). mixt then checks
// that data.val names data.train's classes in the same order (the same count with other
// names would silently score the wrong labels), prints the names in `mixt check`, and
// writes them to the run directory as classes.txt, line i naming output i.
class NamedClasses {
 public:
  virtual ~NamedClasses() = default;
  // One name per class, in label order (class_names()[i] is label i); num_classes() of them.
  virtual std::vector<std::string> class_names() const = 0;
};

// The names of a dataset's classes, or {} when it does not say.
std::vector<std::string> class_names_of(Dataset& dataset);

// For a dataset that can start an epoch part-way without producing the batches before it
// (decoding images costs seconds per batch). A mid-epoch resume then starts there; any
// other dataset has the batches it already delivered replayed through next_batch(), which
// costs little for in-memory data.
class ResumesMidEpoch {
 public:
  virtual ~ResumesMidEpoch() = default;
  // Batches of the current epoch delivered so far: saved with a mid-epoch checkpoint.
  virtual std::int64_t position() const = 0;
  // Starts epoch `epoch` at batch `first_batch`, a position() saved in that epoch.
  virtual void start_epoch_at(std::int64_t epoch, std::int64_t first_batch) = 0;
};

// For a dataset that skips samples it cannot read (undecodable files) rather than failing:
// mixt reports the count with every epoch and fails an epoch of nothing else.
class CountsBadSamples {
 public:
  virtual ~CountsBadSamples() = default;
  // Samples skipped as bad since the dataset was made.
  virtual std::int64_t bad_samples() const = 0;
};

// The dataset's bad-sample count, or 0 for a dataset that does not count them (or none).
std::int64_t bad_samples_of(Dataset* dataset);

// For a dataset that can say what it does to an input before the model sees it, in
// evaluation: `mixt export` writes it into the exported file for whoever deploys the model,
// when the recipe names no transforms of its own.
class DescribesPreprocessing {
 public:
  virtual ~DescribesPreprocessing() = default;
  // E.g. "decode RGB -> resize(256) -> center_crop(224x224) -> to_tensor -> normalize(...)".
  virtual std::string preprocessing() const = 0;
};

// The dataset's description of its preprocessing, or "" when it gives none.
std::string preprocessing_of(Dataset& dataset);

struct DatasetContext {
  std::string split;           // the key under `data:` ("train", "val")
  std::uint64_t seed = 0;      // trainer.seed
  std::int64_t rank = 0;       // shard of this process
  std::int64_t world_size = 1;
  at::Device device = at::kCPU;
};

}  // namespace mixt
