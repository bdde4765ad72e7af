#include "diagnose/diagnosis.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "common/warnings.h"
#include "diagnose/float8_watch.h"
#include "diagnose/module_watch.h"
#include "diagnose/observing_policy.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace mixt::diagnose {

std::string flow_list(const std::vector<std::string>& names) {
  std::string list = "[";
  for (std::size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + names[i];
  return list + "]";
}

std::string fp32_modules_line(const std::vector<std::string>& modules) {
  return "precision.fp32_modules: " + flow_list(modules);
}

std::string fp8_exclude_line(const std::vector<std::string>& modules) {
  return "precision.fp8_exclude: " + flow_list(modules);
}

bool keep_in_bfloat16(const Float8Layer& layer) {
  for (const Float8CastCounts& c : layer.judged()) {
    if (c.underflow_fraction() > kFloat8UnderflowLimit || c.saturated_fraction() > kFloat8SaturationLimit) return true;
  }
  return false;
}

namespace {

struct RunResult {
  Observations observed;
  std::optional<std::string> stopped;
  std::string policy, device;
  std::vector<std::string> recipe_fp32_modules, recipe_fp8_exclude;

  // A run that stopped early (its weights went inf/NaN) is not healthy either.
  bool healthy(const DiagnoseOptions& options) const {
    return !stopped && observed.healthy(options.max_skipped_fraction);
  }
};

// The optimizer's parameters by name: the model's own trainable ones, or (a master-weight
// policy) float32 copies in the same order.
std::vector<std::string> parameter_names(const Model& model, const Optimizer& optimizer) {
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) names.push_back(item.key());
  }
  if (names.size() != optimizer.parameters().size()) {  // an optimizer of its own choosing: by position
    names.clear();
    for (std::size_t i = 0; i < optimizer.parameters().size(); ++i) names.push_back("parameter " + std::to_string(i));
  }
  return names;
}

// `steps` optimizer steps of the recipe (with fp32_modules replaced when given), nothing
// written, nothing evaluated, warnings kept from the terminal (the report says what matters).
RunResult run_steps(Session& session, const std::filesystem::path& recipe, std::vector<std::string> overrides,
                    const std::optional<std::vector<std::string>>& fp32_modules, const DiagnoseOptions& options) {
  if (fp32_modules) overrides.push_back("precision.fp32_modules=" + flow_list(*fp32_modules));
  Experiment e = session.prepare(recipe, overrides);
  if (e.parallel) {
    throw usage_error("mixt diagnose runs as a single process", "run it without torchrun");
  }
  RunResult result;
  for (const ComponentRecord& record : e.facts.records) {
    if (record.kind == "precision") result.policy = record.name;
  }
  result.device = e.facts.device.str();
  result.recipe_fp32_modules = e.recipe.config().section("precision").strings("fp32_modules", {});
  result.recipe_fp8_exclude = e.recipe.config().section("precision").strings("fp8_exclude", {});
  Components& components = e.components;
  components.val.reset();
  components.callbacks.clear();
  ModuleWatch watch(*components.model, result.observed);
  const Float8Watch float8(*components.model, result.observed);  // the policy's setup has installed its functions
  components.precision = std::make_unique<ObservingPolicy>(std::move(components.precision),
                                                           parameter_names(*components.model, *components.optimizer),
                                                           result.observed, watch);
  TrainerOptions o = e.options;
  // As many epochs as `steps` needs, each as long as the data allows: a small dataset's
  // epochs end early, and a run of steps in several epochs is what the recipe would do.
  const std::int64_t per_epoch = std::max<std::int64_t>(1, components.train->batches_per_epoch() / o.accumulate);
  o.epochs = (options.steps + per_epoch - 1) / per_epoch;
  o.max_steps_per_epoch = (options.steps + o.epochs - 1) / o.epochs;
  o.stop_on_nonfinite_loss = false;  // a diverging run is what is being looked at
  o.log_every = std::numeric_limits<std::int64_t>::max() / 2;
  Progress quiet(false, o.log_every, /*quiet=*/true);
  WarningLog muted([](const std::string&) {}, /*echo=*/false);
  try {
    Trainer(components, e.facts, o, nullptr, quiet).fit();
  } catch (const Error& error) {
    if (error.kind() != ErrorKind::runtime) throw;
    result.stopped = error.message();  // e.g. the weights turned inf/NaN: a finding, not a failure
  }
  return result;
}

// Delta debugging (Zeller's ddmin) over the candidate modules: the smallest subset whose
// run is healthy, within the trial budget. Results are cached by set.
class Search {
 public:
  Search(std::function<Trial(const std::vector<std::string>&)> run, std::int64_t budget)
      : run_(std::move(run)), budget_(budget) {}

  // nullopt when the trial budget is spent before the set's run could be made.
  std::optional<bool> healthy(const std::vector<std::string>& modules) {
    const std::set<std::string> key(modules.begin(), modules.end());
    if (const auto known = cache_.find(key); known != cache_.end()) return known->second;
    if (static_cast<std::int64_t>(trials_.size()) >= budget_) return std::nullopt;
    trials_.push_back(run_(modules));
    cache_[key] = trials_.back().healthy;
    return trials_.back().healthy;
  }

  // From a healthy `set`, the smallest healthy subset found; `minimal` says whether every
  // smaller split was tried.
  std::vector<std::string> reduce(std::vector<std::string> set, bool& minimal) {
    std::size_t n = 2;
    minimal = true;
    while (set.size() >= 2) {
      const std::vector<std::vector<std::string>> chunks = split(set, n);
      bool reduced = false, exhausted = false;
      for (const auto& chunk : chunks) {  // a chunk alone
        const std::optional<bool> ok = healthy(chunk);
        if (!ok) exhausted = true;
        if (ok.value_or(false)) {
          set = chunk;
          n = 2;
          reduced = true;
          break;
        }
      }
      for (std::size_t i = 0; !reduced && n > 2 && i < chunks.size(); ++i) {  // all but a chunk
        std::vector<std::string> rest;
        for (std::size_t j = 0; j < chunks.size(); ++j) {
          if (j != i) rest.insert(rest.end(), chunks[j].begin(), chunks[j].end());
        }
        const std::optional<bool> ok = healthy(rest);
        if (!ok) exhausted = true;
        if (ok.value_or(false)) {
          set = rest;
          n = std::max<std::size_t>(n - 1, 2);
          reduced = true;
        }
      }
      if (reduced) continue;
      if (exhausted) {
        minimal = false;
        break;
      }
      if (n >= set.size()) break;
      n = std::min(2 * n, set.size());
    }
    return set;
  }

  std::vector<Trial>& trials() { return trials_; }

 private:
  static std::vector<std::vector<std::string>> split(const std::vector<std::string>& set, std::size_t n) {
    std::vector<std::vector<std::string>> chunks;
    std::size_t start = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t end = start + (set.size() - start) / (n - i);
      chunks.emplace_back(set.begin() + static_cast<std::ptrdiff_t>(start), set.begin() + static_cast<std::ptrdiff_t>(end));
      start = end;
    }
    return chunks;
  }

  std::function<Trial(const std::vector<std::string>&)> run_;
  std::int64_t budget_;
  std::vector<Trial> trials_;
  std::map<std::set<std::string>, bool> cache_;
};

}  // namespace

Diagnosis diagnose(Session& session, const std::filesystem::path& recipe, const std::vector<std::string>& overrides,
                   const DiagnoseOptions& options, const TrialProgress& progress) {
  Diagnosis d;
  d.recipe = recipe.string();
  RunResult observed = run_steps(session, recipe, overrides, std::nullopt, options);
  d.policy = observed.policy;
  d.device = observed.device;
  d.recipe_fp32_modules = observed.recipe_fp32_modules;
  d.healthy = observed.healthy(options);
  d.observed = std::move(observed.observed);
  d.stopped = observed.stopped;
  d.recipe_fp8_exclude = observed.recipe_fp8_exclude;
  for (const Float8Layer& layer : d.observed.float8_layers) {
    if (keep_in_bfloat16(layer)) d.float8_keep.push_back(layer.name);
  }
  if (!d.float8_keep.empty()) {
    d.fp8_exclude = d.recipe_fp8_exclude;
    d.fp8_exclude->insert(d.fp8_exclude->end(), d.float8_keep.begin(), d.float8_keep.end());
  }
  if (d.healthy) return d;

  // The candidates: every module the model routed and the recipe does not keep already.
  // First those whose outputs left float16's range (the first to go non-finite leading),
  // the likeliest fixes, then the rest in call order.
  std::vector<std::string> flagged, candidates;
  const auto add = [&](std::vector<std::string>& list, const std::string& name) {
    const auto& kept = d.recipe_fp32_modules;
    if (std::find(kept.begin(), kept.end(), name) == kept.end() &&
        std::find(list.begin(), list.end(), name) == list.end()) {
      list.push_back(name);
    }
  };
  if (d.observed.first_nonfinite) add(flagged, d.observed.first_nonfinite->module);
  for (const auto& [name, counts] : d.observed.modules) {
    if (counts.beyond_float16 > 0 || counts.nonfinite > 0) add(flagged, name);
  }
  candidates = flagged;
  for (const auto& module : d.observed.modules) add(candidates, module.first);
  if (candidates.empty()) return d;

  const auto with_recipes = [&](const std::vector<std::string>& tried) {
    std::vector<std::string> all = d.recipe_fp32_modules;
    all.insert(all.end(), tried.begin(), tried.end());
    return all;
  };
  std::int64_t number = 0;
  Search search(
      [&](const std::vector<std::string>& tried) {
        const std::vector<std::string> modules = with_recipes(tried);
        progress("trial " + std::to_string(++number) + "/" + std::to_string(options.max_trials) + ": " +
                 fp32_modules_line(modules) + " ...");
        RunResult run = run_steps(session, recipe, overrides, modules, options);
        Trial trial{modules, static_cast<std::int64_t>(run.observed.steps.size()), run.observed.skipped(),
                    run.observed.losses_finite(), run.healthy(options)};
        progress("trial " + std::to_string(number) + ": " + std::to_string(trial.steps) + " steps, " +
                 std::to_string(trial.skipped) + " skipped, loss " + (trial.losses_finite ? "finite" : "inf/NaN") +
                 (trial.healthy ? ": healthy" : ": not healthy"));
        return trial;
      },
      options.max_trials);

  // The likeliest fix alone first, then every flagged module, then all of them; from the
  // first healthy set down.
  std::optional<std::vector<std::string>> found;
  if (search.healthy({candidates.front()}).value_or(false)) {
    found = std::vector<std::string>{candidates.front()};
    d.fix_minimal = true;  // the recipe as written is not healthy: nothing smaller is
  } else {
    for (const std::vector<std::string>& start : {flagged, candidates}) {
      if (start.size() < 2 || !search.healthy(start).value_or(false)) continue;
      bool minimal = false;
      found = search.reduce(start, minimal);
      d.fix_minimal = minimal;
      break;
    }
  }
  if (found) d.fix = with_recipes(*found);
  d.trials = std::move(search.trials());
  return d;
}

}  // namespace mixt::diagnose
