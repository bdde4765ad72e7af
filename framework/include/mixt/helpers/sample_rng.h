// mixt/helpers/sample_rng.h — the random numbers of one sample's augmentation.
//
// Every random decision about a sample (crop box, flip, jitter factors) is drawn from a
// SampleRng seeded by (seed, epoch, sample index) alone. A sample therefore gets the same
// augmentation whichever worker thread loads it and however many workers there are: the
// loader's results do not depend on its parallelism. The generator is SplitMix64 (Steele,
// Lea, Flood 2014): tiny, fast, and good enough for augmentation decisions.
#pragma once

#include <cmath>
#include <cstdint>

namespace mixt {

class SampleRng {
 public:
  explicit SampleRng(std::uint64_t state) : state_(state) {}

  // The generator of sample `index` in epoch `epoch` of a run seeded with `seed`.
  static SampleRng for_sample(std::uint64_t seed, std::uint64_t epoch, std::uint64_t index) {
    // Each field goes through a full mixing round so nearby (seed, epoch, index) triples
    // start far apart.
    return SampleRng(mix(mix(mix(seed) ^ epoch) ^ index));
  }

  std::uint64_t next_u64() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return mix(state_);
  }
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in [low, high).
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  // Uniform integer in [low, high] (inclusive, as Python's random.randint and torch.randint(low, high + 1)).
  std::int64_t integer(std::int64_t low, std::int64_t high) {
    const auto span = static_cast<std::uint64_t>(high - low) + 1;
    return low + static_cast<std::int64_t>(next_u64() % span);
  }
  bool bernoulli(double p) { return uniform() < p; }

 private:
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  std::uint64_t state_;
};

}  // namespace mixt
