// The keys both token datasets read beyond naming their data: how the stream is cut into
// windows, and the loader's.
#pragma once

#include <mixt/helpers/data_loader.h>
#include <mixt/options.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tokens {

struct WindowKeys {
  std::int64_t context = 1024;  // T: tokens per sample
  double from = 0.0;            // the span used: [from, to) of the stream, as fractions
  double to = 1.0;
};

// context (with the dataset's default), from and to, for OptionsOf::include.
mixt::OptionsOf<WindowKeys> window_keys(std::int64_t context_default);

// The loader's keys (mixt::loader_keys) into `field`, but on_bad_sample: no window is ever
// skipped (an id outside the vocabulary stops the run), so that key is refused where
// written rather than listed as doing what it does not.
template <class S>
mixt::OptionsOf<S> with_loader_keys(const mixt::OptionsOf<S>& options, mixt::LoaderKeys S::*field,
                                    std::int64_t batch_size_default) {
  const mixt::OptionsOf<mixt::LoaderKeys> group = mixt::loader_keys(batch_size_default);
  std::vector<mixt::OptionDoc> docs;
  for (const mixt::OptionDoc& doc : group.docs()) {
    if (doc.name != "on_bad_sample") docs.push_back(doc);
  }
  return options
      .refuse({"on_bad_sample"}, "token windows are never skipped: a token id outside the vocabulary stops the run",
              "remove on_bad_sample")
      .read_with(docs, [group, field](const mixt::Config& c, S& into) { into.*field = group.read(c); });
}

}  // namespace tokens
