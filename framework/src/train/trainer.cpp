#include "train/trainer.h"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <chrono>

#include "mixt/helpers/fp32_modules.h"
#include "common/interrupt.h"
#include "train/gradient_norm.h"
#include "train/out_of_memory.h"
#include "common/warnings.h"

namespace mixt {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {
// LibTorch's message alone ("Expected more than 1 value per channel when training") does
// not say which batch, nor what to change in the recipe.
[[noreturn]] void forward_failed(const c10::Error& e, std::int64_t epoch, std::int64_t step,
                                 const at::Tensor& inputs) {
  const std::string what = e.what_without_backtrace();
  std::string hint;
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) hint = kOutOfMemoryHint;
  if (inputs.size(0) == 1 && what.find("more than 1 value per channel when training") != std::string::npos) {
    hint = "batch norm needs two or more samples per training batch: a batch of one is the epoch's last when the "
           "dataset size leaves one over (or the rest of its samples were skipped as bad); set "
           "data.train.drop_last: true";
  }
  throw Error(ErrorKind::runtime,
              "epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(step + 1) +
                  ": training forward pass on a batch of shape " + c10::str(inputs.sizes()) + " failed: " + what,
              {}, {}, hint);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The step's mean loss per micro-batch from the sum of its (loss / accumulate) terms:
// the sum itself unless the step had fewer micro-batches (the epoch's ragged end).
at::Tensor mean_loss(const at::Tensor& loss_sum, std::int64_t micro_batches, std::int64_t accumulate) {
  if (micro_batches == accumulate) return loss_sum;
  return loss_sum.to(at::kDouble).mul(static_cast<double>(accumulate)).div(static_cast<double>(micro_batches));
}
}  // namespace

Trainer::Trainer(Components& components, TrainerOptions options, RunDirectory* run, Progress& progress,
                 Coordinator* coordinator)
    : components_(components),
      options_(std::move(options)),
      run_(run),
      progress_(progress),
      coordinator_(coordinator ? *coordinator : single_process_),
      checkpointer_(components_, options_, state_, coordinator_),
      run_log_(std::make_shared<RunLog>(progress)) {
  state_.epochs = options_.epochs;
  run_log_->write_to(run_);
  // The ledger's device values are read where the host reads anyway: logged steps and an
  // epoch's end below, a progress line that shows skipped_steps, and before any checkpoint.
  run_log_->settle_counts_with([this] { ledger_.settle(); });
  checkpointer_.settle_before_saving_with([this] { ledger_.settle(); });
  callbacks_.push_back({run_log_, "progress", "mixt", ""});
  callbacks_.insert(callbacks_.end(), components_.callbacks.begin(), components_.callbacks.end());
}

void Trainer::write_to(RunDirectory* run) {
  run_ = run;
  run_log_->write_to(run);
}

void Trainer::add_callback(std::shared_ptr<Callback> callback, std::string name) {
  callbacks_.push_back({std::move(callback), std::move(name), "mixt", ""});
}

TrainResult Trainer::fit() {
  TrainResult result;
  const auto start = Clock::now();
  std::optional<WarningLog> warnings_in_log;  // every warning of the run in log.txt and metrics.jsonl too
  if (run_) {
    warnings_in_log.emplace([run = run_](const std::string& line) {
      run->append_log(line);
      const std::string prefix = "mixt: warning: ";
      const std::string message = line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : line;
      run->append_metrics({{"event", "warning"}, {"message", message}});
    });
  }
  coordinator_.broadcast_model(*components_.model);  // every rank starts from rank 0's weights
  const FitStart fit{state_, run_ ? run_->path() : fs::path(), coordinator_.rank(), coordinator_.world_size()};
  notify("on_fit_start", [&](Callback& callback) { callback.on_fit_start(fit); });
  for (; state_.epoch < options_.epochs; ++state_.epoch) {
    const std::int64_t steps_before = result.optimizer_steps, skipped_before = result.skipped_steps;
    const std::int64_t bad_before = bad_samples_of(components_.train.get()) + bad_samples_of(components_.val.get());
    bool mid_epoch = false;  // a callback's stop request ended the epoch early
    try {
      mid_epoch = train_epoch(result);
    } catch (const Error& failure) {
      throw with_progress_saved(failure);
    }
    check_loss_finite();
    check_weights_finite();
    warn_if_most_steps_were_skipped(result.optimizer_steps - steps_before, result.skipped_steps - skipped_before);
    // The epoch's checkpoint comes before its evaluation, so an evaluation that fails (a bad
    // validation file under on_bad_sample: fail) does not cost the epoch's training; the
    // callbacks' state after the evaluation is written into it after on_epoch_end.
    if (!mid_epoch) state_.batches_in_epoch = 0;
    coordinator_.check_in_sync(*components_.model, "after epoch " + std::to_string(state_.epoch + 1));
    const fs::path checkpoint = save_epoch_checkpoint(mid_epoch);
    coordinator_.barrier();  // rank 0's checkpoint is written before any rank goes on
    std::optional<Evaluation> eval;
    std::vector<Evaluation> others;
    if (components_.val) {
      eval = evaluate_with_callbacks(*components_.val, "");
      if (eval->interrupted) stop_at_epoch_end(/*evaluation_skipped=*/true);
      warn_if_validation_is_not_finite(*eval);
      // A NaN score would read as a result; the epoch's checkpoint is written already.
      if (eval->samples == 0) {
        throw runtime_error("data.val gave no usable sample after epoch " + std::to_string(state_.epoch + 1) +
                                ": every one was skipped as bad (the warnings above name the first); the epoch's "
                                "checkpoint is written",
                            "fix or remove the files, then continue with trainer.resume; data.val=null trains "
                            "without validation");
      }
      result.final_eval = eval;
      for (const std::string& weights : other_weights()) {
        others.push_back(evaluate_with_callbacks(*components_.val, weights));
        if (others.back().interrupted) stop_at_epoch_end(/*evaluation_skipped=*/true);
      }
    }
    const double bad = static_cast<double>(bad_samples_of(components_.train.get()) +
                                           bad_samples_of(components_.val.get()) - bad_before);
    const EpochEnd end{state_,
                       eval ? &*eval : nullptr,
                       std::move(others),
                       static_cast<std::int64_t>(coordinator_.sum({bad})[0]),
                       seconds_since(start),
                       checkpoint,
                       stops_};
    result.bad_samples += end.bad_samples;
    notify("on_epoch_end", [&](Callback& callback) { callback.on_epoch_end(end); });
    update_callback_state(checkpoint);
    // After the last epoch there is nothing left to stop.
    const bool more = state_.epoch + 1 < options_.epochs;
    const Stop stop = mid_epoch ? Stop::end_run : more ? decide_at_epoch_end() : Stop::go_on;
    if (stop == Stop::interrupt) stop_at_epoch_end(/*evaluation_skipped=*/false);
    if (stop == Stop::end_run) {
      report_early_end(result, mid_epoch);
      if (!mid_epoch) ++state_.epoch;  // the next to start, as after the last epoch
      break;
    }
  }
  notify("on_fit_end", [&](Callback& callback) { callback.on_fit_end(state_); });
  result.elapsed_seconds = seconds_since(start);
  return result;
}

// One epoch: an optimizer step per iteration, as mixt/precision.h lists it (the one
// listing), with the trainer's parts in between: the gradients averaged over ranks, then
// the agreement on the step and the callbacks.
bool Trainer::train_epoch(TrainResult& result) {
  Dataset& data = *components_.train;
  PrecisionPolicy& precision = *components_.precision;
  Optimizer& optimizer = *components_.optimizer;
  const std::int64_t accumulate = options_.accumulate, steps = steps_per_epoch();

  batches_in_weights_ = state_.batches_in_epoch;  // what a failure before the first step keeps
  const std::int64_t bad_at_start = bad_samples_of(&data);  // before start_data: the workers start decoding
  start_data(data);
  const std::int64_t first_step = state_.batches_in_epoch / accumulate;
  const EpochStart epoch_start{state_, steps, first_step};
  notify("on_epoch_start", [&](Callback& callback) { callback.on_epoch_start(epoch_start); });
  components_.model->train();

  const auto started = Clock::now();
  const std::int64_t skipped_at_start = state_.skipped_steps;
  std::int64_t step = first_step, epoch_samples = 0;
  bool data_left = true, ended_early = false;
  while (step < steps && data_left) {
    const bool logged = (step + 1) % options_.log_every == 0;
    precision.begin_step(state_.global_step + 1, logged);
    optimizer.zero_grad();
    at::Tensor loss_sum;
    std::int64_t micro_batches = 0;
    for (; micro_batches < accumulate; ++micro_batches) {
      std::optional<Batch> batch = data.next_batch();
      if (!batch) {
        data_left = false;
        break;
      }
      const at::Tensor inputs = to_device(batch->inputs);
      const at::Tensor loss = forward_loss(inputs, batch->targets.to(components_.device, /*non_blocking=*/true), step);
      coordinator_.prepare_backward(micro_batches + 1 == accumulate);
      precision.backward(loss);
      loss_sum = loss_sum.defined() ? loss_sum + loss.detach() : loss.detach();
      epoch_samples += inputs.size(0);
      ++state_.batches_in_epoch;
    }
    if (micro_batches == 0) break;
    coordinator_.average_gradients();  // before the policy sees them: every rank steps on the same numbers
    precision.gradients_ready(optimizer);
    at::Tensor grad_norm;  // on the device: read only by whoever needs it
    if (options_.clip_grad_norm > 0 || logged || options_.grad_norm == "every_step") {
      precision.unscale(optimizer);
      grad_norm = gradient_norm(optimizer.parameters());
      if (options_.clip_grad_norm > 0 && grad_norm.defined()) {
        clip_gradients(optimizer.parameters(), grad_norm, options_.clip_grad_norm);
      }
    }
    // Possibly decided on the device (a sync-free loss-scaled step): read below only where
    // the host needs it, i.e. for the scheduler and for callbacks that ask.
    const StepOutcome applied = precision.step(optimizer);
    precision.update();
    if (components_.scheduler && applied.applied()) components_.scheduler->step();

    ++step;
    ++state_.global_step;
    ledger_.count(applied, components_.device);
    // After this process's first step, a resumed run's too (global_step is not 1 then).
    if (++result.optimizer_steps == 1) check_listed_submodules_routed(components_);
    batches_in_weights_ = state_.batches_in_epoch;  // from here a failure keeps this step
    const StepAgreement agreed = coordinator_.agree_on_step(mean_loss(loss_sum, micro_batches, accumulate));
    if (options_.stop_on_nonfinite_loss) ledger_.watch_loss(agreed.loss, agreed.on_host, applied, state_.global_step);
    if (logged || agreed.on_host) ledger_.settle();  // the loss is read there: one more copy costs nothing
    const StepEnd end{state_,
                      step,
                      steps,
                      applied,
                      agreed.loss,
                      optimizer.learning_rate(),
                      precision,
                      epoch_samples * coordinator_.world_size(),
                      seconds_since(started),
                      logged,
                      stops_,
                      grad_norm};
    notify("on_step_end", [&](Callback& callback) { callback.on_step_end(end); });
    // The loss was read where it is shown, logged or agreed: checking it costs one more scalar.
    const Stop stop = decide_after_step(agreed.on_host || end.logged);
    if (stop == Stop::interrupt) stop_mid_epoch(step);
    if (stop == Stop::end_run) {
      ended_early = step < steps && data_left;
      break;
    }
  }
  ledger_.settle();
  // Every batch passed over (each sample bad): nothing was trained, and a run of such
  // epochs would end "done" with exit 0.
  if (step == first_step && first_step < steps) {
    const std::int64_t bad = bad_samples_of(&data) - bad_at_start;
    if (bad > 0) {
      throw runtime_error("data.train gave no usable sample in epoch " + std::to_string(state_.epoch + 1) +
                              ": all " + std::to_string(bad) +
                              " were skipped as bad (the warnings above name the first)",
                          "fix or remove the files named in the warnings");
    }
    throw runtime_error("data.train delivered no batch in epoch " + std::to_string(state_.epoch + 1) +
                            " although it has " + std::to_string(data.batches_per_epoch()) + " batches per epoch",
                        "a dataset's next_batch() must deliver batches_per_epoch() batches (mixt/dataset.h)");
  }
  result.skipped_steps += state_.skipped_steps - skipped_at_start;
  result.samples += epoch_samples * coordinator_.world_size();
  result.train_seconds += seconds_since(started);
  return ended_early;
}

at::Tensor Trainer::forward_loss(const at::Tensor& inputs, const at::Tensor& targets, std::int64_t step) {
  try {
    AutocastScope scope = components_.precision->autocast(components_.device.type());
    const at::Tensor logits = components_.model->forward(inputs);
    at::Tensor loss =
        at::cross_entropy_loss(logits, targets, {}, at::Reduction::Mean, -100, options_.label_smoothing);
    // Only when accumulating: dividing by 1 is exact but costs a kernel and a backward node.
    if (options_.accumulate > 1) loss = loss / static_cast<double>(options_.accumulate);
    return loss;
  } catch (const c10::Error& e) {
    forward_failed(e, state_.epoch, step, inputs);
  }
}

void Trainer::resume(const fs::path& checkpoint, bool check_data_order) {
  Checkpointer::Resumed resumed = checkpointer_.resume(checkpoint, check_data_order);
  resume_data_positions_ = std::move(resumed.data_positions);
  resumed_from_ = resumed.file;
  progress_.note("resumed from " + resumed.file.string() + " at epoch " + std::to_string(state_.epoch + 1) +
                 ", step " + std::to_string(state_.global_step));
  // trainer.epochs is the total, not how many more: a lower one would end the run at once.
  if (finished()) {
    warn("the checkpoint has finished " + std::to_string(state_.epoch) +
         " epochs and trainer.epochs (the total, not how many more) is " + std::to_string(options_.epochs) +
         ": nothing left to train; to go on, raise trainer.epochs above " + std::to_string(state_.epoch));
  }
}

// Resuming mid-epoch: the order of an epoch depends only on seed and epoch, so going past
// the batches already trained on puts the run exactly where the interrupted one stopped.
// A dataset that can start part-way (image folders: seconds of JPEG decoding per batch)
// starts at the saved position; any other replays them through next_batch(). Each rank
// restarts at its own saved position.
void Trainer::start_data(Dataset& data) {
  auto* resumable = dynamic_cast<ResumesMidEpoch*>(&data);
  const bool saved = resume_data_positions_.size() == static_cast<std::size_t>(coordinator_.world_size());
  if (state_.batches_in_epoch > 0 && resumable && saved) {
    resumable->start_epoch_at(state_.epoch, resume_data_positions_[static_cast<std::size_t>(coordinator_.rank())]);
  } else {
    data.start_epoch(state_.epoch);
    for (std::int64_t skip = 0; skip < state_.batches_in_epoch; ++skip) data.next_batch();
  }
  resume_data_positions_.clear();
}

std::vector<std::int64_t> Trainer::data_positions() const {
  const auto* resumable = dynamic_cast<const ResumesMidEpoch*>(components_.train.get());
  return resumable ? coordinator_.gather(resumable->position()) : std::vector<std::int64_t>{};
}

std::int64_t Trainer::steps_per_epoch() const { return options_.steps_per_epoch(components_.train->batches_per_epoch()); }

at::Tensor Trainer::to_device(const at::Tensor& inputs) const {
  at::Tensor moved = inputs.to(components_.device, /*non_blocking=*/true);
  if (options_.channels_last && moved.dim() == 4) moved = moved.contiguous(at::MemoryFormat::ChannelsLast);
  return components_.precision->prepare_input(moved);
}

}  // namespace mixt
