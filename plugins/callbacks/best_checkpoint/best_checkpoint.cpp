// callbacks/best_checkpoint — keeps the checkpoints of the best epochs by a validation
// figure (Lightning's ModelCheckpoint(monitor, mode, save_top_k), MMEngine's save_best).
//
// checkpoints/best-epoch-NNNN for each of the save_top_k best epochs so far (a hard link to
// the epoch's checkpoint where the file system allows, else a copy: trainer.keep_checkpoints
// rotates epoch-NNNN names only, so these stay) and `best`, a link to the best of them;
// `mixt export RUN --best` reads it. The epoch's checkpoint is final only after
// on_epoch_end (the trainer then writes the callbacks' state into it), so the file is
// made at the next hook: the next epoch's start, the end of the run, an interrupt, or a
// resume. The ranking is kept in checkpoints: a resumed run (in its new run directory)
// brings the earlier run's best files over and goes on ranking; a worse epoch never
// replaces a better one. Rank 0 writes the files; every rank ranks alike.
#include <mixt/callback.h>
#include <mixt/error.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../common/monitor.h"

namespace {

namespace fs = std::filesystem;
using mixt::callbacks::Monitor;

struct BestCheckpointOptions {
  mixt::callbacks::MonitorOptions monitor;
  std::int64_t save_top_k = 1;
};

std::string best_name(std::int64_t epoch) {
  char name[40];
  std::snprintf(name, sizeof(name), "best-epoch-%04lld", static_cast<long long>(epoch));
  return name;
}

// `target` as `source`'s contents, whole or not at all: a hard link, else a copy.
void place(const fs::path& source, const fs::path& target) {
  const fs::path temporary = target.string() + ".tmp";
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);  // a resumed run's, before its first checkpoint
  fs::remove(temporary, ec);
  ec.clear();
  fs::create_hard_link(source, temporary, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(source, temporary, fs::copy_options::overwrite_existing, ec);
  }
  if (!ec) fs::rename(temporary, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(temporary, ec);
    throw mixt::runtime_error("best_checkpoint: cannot make " + target.string() + " from " + source.string() + ": " +
                              why);
  }
}

class BestCheckpoint final : public mixt::Callback {
 public:
  BestCheckpoint(Monitor monitor, std::int64_t top_k) : monitor_(std::move(monitor)), top_k_(top_k) {}

  void on_fit_start(const mixt::FitStart& fit) override {
    if (fit.run_directory.empty()) return;  // tests, mixt bench, the ranks other than 0
    directory_ = fit.run_directory / "checkpoints";
    // A resumed run writes a new run directory: the earlier run's best files come along.
    for (Entry& entry : ranking_) {
      const fs::path here = directory_ / best_name(entry.epoch);
      if (entry.file == here.string() || (pending_ && pending_->epoch == entry.epoch)) continue;
      std::error_code ec;
      if (fs::exists(here, ec)) {
        entry.file = here.string();
      } else if (fs::exists(entry.file, ec)) {
        place(entry.file, here);
        entry.file = here.string();
      } else {
        mixt::warn("best_checkpoint: " + entry.file + " (epoch " + std::to_string(entry.epoch) +
                   ", one of the best) is gone; it stays in the ranking without a file");
      }
    }
    settle();
  }
  void on_epoch_start(const mixt::EpochStart&) override { settle(); }
  void on_interrupt(const mixt::TrainState&, const fs::path&) override { settle(); }
  void on_fit_end(const mixt::TrainState&) override { settle(); }

  void on_epoch_end(const mixt::EpochEnd& epoch) override {
    const std::optional<double> value = monitor_.value(epoch);
    if (!value || std::isnan(*value)) {
      if (!value && !warned_) {
        mixt::warn("best_checkpoint: no evaluation reports " + monitor_.name +
                   " (no validation data, or no callback evaluates those weights): no best checkpoint is kept");
      }
      warned_ = !value || warned_;
      return;
    }
    const std::int64_t number = epoch.state.epoch + 1;
    const bool room = static_cast<std::int64_t>(ranking_.size()) < top_k_;
    if (!room && !monitor_.improves(*value, ranking_.back().score, 0.0)) return;
    const fs::path file = directory_.empty() ? fs::path() : directory_ / best_name(number);
    ranking_.push_back({number, *value, file.string()});
    // Best first; an equal score keeps the earlier epoch ahead.
    std::stable_sort(ranking_.begin(), ranking_.end(),
                     [&](const Entry& a, const Entry& b) { return monitor_.improves(a.score, b.score, 0.0); });
    if (static_cast<std::int64_t>(ranking_.size()) > top_k_) {
      drop(ranking_.back());
      ranking_.pop_back();
    }
    if (!epoch.checkpoint.empty()) pending_ = Pending{number, epoch.checkpoint.string()};
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    std::vector<std::int64_t> epochs;
    std::vector<double> scores;
    std::vector<std::string> files;
    for (const Entry& e : ranking_) {
      epochs.push_back(e.epoch);
      scores.push_back(e.score);
      files.push_back(e.file);
    }
    archive.write("epochs", c10::IValue(epochs));
    archive.write("scores", c10::IValue(scores));
    archive.write("files", c10::IValue(c10::List<std::string>(files)));
    archive.write("pending_epoch", c10::IValue(pending_ ? pending_->epoch : std::int64_t{0}));
    archive.write("pending_source", c10::IValue(pending_ ? pending_->source : std::string()));
  }
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue epochs, scores, files, pending_epoch, pending_source;
    if (!archive.try_read("epochs", epochs) || !archive.try_read("scores", scores) ||
        !archive.try_read("files", files)) {
      return;
    }
    ranking_.clear();
    const std::vector<std::int64_t> e = epochs.toIntVector();
    const std::vector<double> s = scores.toDoubleVector();
    const c10::List<c10::IValue> f = files.toList();
    for (std::size_t i = 0; i < e.size() && i < s.size() && i < f.size(); ++i) {
      ranking_.push_back({e[i], s[i], f.get(i).toStringRef()});
    }
    pending_.reset();
    if (archive.try_read("pending_epoch", pending_epoch) && archive.try_read("pending_source", pending_source) &&
        pending_epoch.toInt() > 0) {
      pending_ = Pending{pending_epoch.toInt(), pending_source.toStringRef()};
    }
    // Another save_top_k than the run had: the worst beyond it drop out now.
    while (static_cast<std::int64_t>(ranking_.size()) > top_k_) {
      drop(ranking_.back());
      ranking_.pop_back();
    }
  }

 private:
  struct Entry {
    std::int64_t epoch = 0;  // 1-based
    double score = NAN;
    std::string file;  // where its checkpoint is (another run's directory until a resume brings it over)
  };
  struct Pending {
    std::int64_t epoch = 0;
    std::string source;  // the epoch's checkpoint, final from the next hook on
  };

  // The file of the best epoch that is still pending, once its checkpoint is final.
  void settle() {
    if (directory_.empty()) return;
    if (pending_) {
      const auto entry =
          std::find_if(ranking_.begin(), ranking_.end(), [&](const Entry& e) { return e.epoch == pending_->epoch; });
      if (entry != ranking_.end()) {
        const fs::path here = directory_ / best_name(entry->epoch);
        std::error_code ec;
        if (fs::exists(pending_->source, ec)) {
          place(pending_->source, here);
          entry->file = here.string();
        }
      }
      pending_.reset();
    }
    point_best_link();
  }

  // Only this run's own files are removed: an earlier run's directory is left as it is.
  void drop(const Entry& entry) {
    if (pending_ && pending_->epoch == entry.epoch) pending_.reset();
    if (directory_.empty() || fs::path(entry.file).parent_path() != directory_) return;
    std::error_code ec;
    fs::remove(entry.file, ec);
  }

  void point_best_link() {
    if (ranking_.empty()) return;
    const fs::path target = ranking_.front().file;
    std::error_code ec;
    if (target.parent_path() != directory_ || !fs::exists(target, ec)) return;
    const fs::path link = directory_ / "best", temporary = directory_ / "best.tmp";
    fs::remove(temporary, ec);
    ec.clear();
    fs::create_symlink(target.filename(), temporary, ec);
    if (!ec) fs::rename(temporary, link, ec);
    if (ec) {
      mixt::warn("best_checkpoint: cannot point " + link.string() + " at " + target.string() + ": " + ec.message());
    }
  }

  Monitor monitor_;
  std::int64_t top_k_;
  std::vector<Entry> ranking_;  // best first, at most top_k_
  std::optional<Pending> pending_;
  fs::path directory_;  // this run's checkpoints/, empty when it writes none
  bool warned_ = false;
};

using O = BestCheckpointOptions;
const auto kOptions = mixt::OptionsOf<O>()
                          .include(&O::monitor, mixt::callbacks::kMonitorOptions)
                          .add(&O::save_top_k, "save_top_k", "how many of the best epochs keep their checkpoint",
                               mixt::at_least(1));

std::unique_ptr<mixt::Callback> make_best_checkpoint(const BestCheckpointOptions& o, const mixt::CallbackContext& context) {
  return std::make_unique<BestCheckpoint>(o.monitor.watched(context.task_figures), o.save_top_k);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_callback("best_checkpoint",
                         "keeps checkpoints/best-epoch-NNNN of the save_top_k best epochs by a validation figure, and "
                         "a `best` link (mixt export RUN --best)",
                         kOptions, make_best_checkpoint);
}

}  // namespace

MIXT_PLUGIN("best_checkpoint", "1.0.0", register_components)
