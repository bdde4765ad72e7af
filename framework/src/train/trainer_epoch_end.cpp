// The Trainer at an epoch's end: its checkpoint, the evaluations between the callbacks'
// hooks, on_epoch_end and the stop decision; and the two ends a signal makes.
#include "common/optimizer_shards.h"
#include "train/epoch_warnings.h"
#include "train/trainer.h"

namespace mixt {

namespace fs = std::filesystem;
using Stop = StopDecider::Stop;

Stop Trainer::end_epoch(TrainResult& result, bool mid_epoch, std::int64_t bad_before,
                        std::chrono::steady_clock::time_point fit_started) {
  // The epoch's checkpoint comes before its evaluation, so an evaluation that fails (a bad
  // validation file under on_bad_sample: fail) does not cost the epoch's training; the
  // callbacks' state after the evaluation is written into it after on_epoch_end.
  if (!mid_epoch) state_.batches_in_epoch = 0;
  coordinator_.check_in_sync(*components_.model, "after epoch " + std::to_string(state_.epoch + 1));
  save_ranks_parts(recovery_.next_file(mid_epoch));
  const fs::path checkpoint = mid_epoch ? recovery_.save_interrupted(data_.positions()) : recovery_.save_epoch_end();
  coordinator_.barrier();  // rank 0's checkpoint is written before any rank goes on
  EpochEvaluations evaluations = evaluate_epoch();
  if (evaluations.own) result.final_eval = evaluations.own;
  const double bad = static_cast<double>(bad_samples_of(components_.train.get()) +
                                         bad_samples_of(components_.val.get()) - bad_before);
  const EpochEnd end{state_,
                     evaluations.own ? &*evaluations.own : nullptr,
                     std::move(evaluations.others),
                     static_cast<std::int64_t>(coordinator_.sum({bad})[0]),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - fit_started).count(),
                     checkpoint,
                     stops_.control()};
  result.bad_samples += end.bad_samples;
  notify("on_epoch_end", [&](Callback& callback) { callback.on_epoch_end(end); });
  recovery_.update_callback_state(checkpoint);
  // After the last epoch there is nothing left to stop.
  if (mid_epoch) return Stop::end_run;
  return state_.epoch + 1 < options_.epochs ? stops_.at_epoch_end() : Stop::go_on;
}

Trainer::EpochEvaluations Trainer::evaluate_epoch() {
  EpochEvaluations evaluations;
  if (!components_.val) return evaluations;
  const Evaluation own = evaluate_with_callbacks(*components_.val, "");
  if (own.interrupted) stop_at_epoch_end(/*evaluation_skipped=*/true);
  warn_if_validation_is_not_finite(state_.epoch, own);
  // A NaN score would read as a result; the epoch's checkpoint is written already.
  if (own.samples == 0) {
    throw runtime_error("data.val gave no usable sample after epoch " + std::to_string(state_.epoch + 1) +
                            ": every one was skipped as bad (the warnings above name the first); the epoch's "
                            "checkpoint is written",
                        "fix or remove the files, then continue with trainer.resume; data.val=null trains "
                        "without validation");
  }
  evaluations.own = own;
  for (const std::string& weights : other_weights()) {
    evaluations.others.push_back(evaluate_with_callbacks(*components_.val, weights));
    if (evaluations.others.back().interrupted) stop_at_epoch_end(/*evaluation_skipped=*/true);
  }
  return evaluations;
}

std::vector<std::string> Trainer::other_weights() const {
  std::vector<std::string> names;
  for (const NamedCallback& c : callbacks_) {
    std::string weights;
    c.guarded("evaluated_weights", [&] { weights = c.callback->evaluated_weights(); });
    if (!weights.empty()) names.push_back(std::move(weights));
  }
  return names;
}

Evaluation Trainer::evaluate_with_callbacks(Dataset& dataset, const std::string& weights) {
  notify("on_evaluation_start", [&](Callback& callback) { callback.on_evaluation_start(state_, weights); });
  // Each rank evaluates its shard with the weights it swapped in: they must be the same.
  if (!weights.empty()) {
    coordinator_.check_in_sync(
        *components_.model,
        "with the " + weights + " weights in for their evaluation after epoch " + std::to_string(state_.epoch + 1),
        "a callback's evaluated weights must be the same on every rank: derive them from "
        "the synchronised weights only (not from rank-local data)");
  }
  Evaluation eval = evaluator_.evaluate(dataset);
  eval.weights = weights;
  notify("on_evaluation_end", [&](Callback& callback) { callback.on_evaluation_end(state_, eval); });
  return eval;
}

void Trainer::report_early_end(TrainResult& result, bool mid_epoch) {
  const StopRequest& request = *stops_.request();
  result.stopped_early = request;
  const std::string epoch = std::to_string(state_.epoch + 1);
  run_log_->stopped_early(request, state_,
                          mid_epoch ? "in epoch " + epoch + ", after step " + std::to_string(state_.global_step)
                                    : "after epoch " + epoch + " of " + std::to_string(options_.epochs));
}

void Trainer::stop_mid_epoch(std::int64_t step) {
  const WholeModel whole(components_.optimizer_shards);
  stops_.check_loss_finite();  // never a checkpoint of inf/NaN weights
  stops_.check_weights_finite();
  // Every rank takes part. A rank lost since the stop was agreed must not cost rank 0 its
  // checkpoint: save without positions (a resume then replays those batches) and let the
  // barrier below report the failure.
  std::vector<std::int64_t> positions;
  try {
    positions = data_.positions();
  } catch (const std::exception&) {  // positions stay empty
  }
  bool shards_saved = true;
  try {
    save_ranks_parts(recovery_.next_file(/*mid_epoch=*/true));
  } catch (const std::exception&) {
    shards_saved = false;  // a rank lost: a checkpoint without its shard could not be resumed
  }
  const fs::path file = shards_saved ? recovery_.interrupted_mid_epoch(step, positions) : fs::path();
  notify("on_interrupt", [&](Callback& callback) { callback.on_interrupt(state_, file); });
  coordinator_.barrier();
  throw Error(ErrorKind::interrupted, "interrupted");
}

void Trainer::stop_at_epoch_end(bool evaluation_skipped) {
  const fs::path file = recovery_.interrupted_at_epoch_end(evaluation_skipped);
  notify("on_interrupt", [&](Callback& callback) { callback.on_interrupt(state_, file); });
  throw Error(ErrorKind::interrupted, "interrupted");
}

}  // namespace mixt
