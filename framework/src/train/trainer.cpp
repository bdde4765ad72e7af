#include "train/trainer.h"

#include "assembly/model_input.h"
#include "common/optimizer_shards.h"
#include "common/warnings.h"
#include "mixt/weight_shards.h"
#include "train/epoch_warnings.h"
#include "train/gradient_norm.h"

namespace mixt {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Stop = StopDecider::Stop;

namespace {
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
}  // namespace

Trainer::Trainer(Components& components, const RunFacts& facts, TrainerOptions options, RunDirectory* run,
                 Progress& progress, Coordinator* coordinator)
    : components_(components),
      facts_(facts),
      options_(std::move(options)),
      coordinator_(coordinator ? *coordinator : single_process_),
      checkpointer_(components_, facts_, options_, state_, coordinator_),
      recovery_(checkpointer_, state_, progress),
      stops_(components_, options_, state_, ledger_, coordinator_,
             [this](const std::string& before_what) { return recovery_.newest_good_checkpoint(before_what); }),
      data_(components_, coordinator_),
      loss_(components_, facts_, options_.accumulate),
      evaluator_(components_, facts_, coordinator_),
      run_log_(std::make_shared<RunLog>(progress)) {
  state_.epochs = options_.epochs;
  write_to(run);
  // The ledger's device values are read where the host reads anyway: logged steps and an
  // epoch's end below, a progress line that shows skipped_steps, and before any checkpoint.
  run_log_->settle_counts_with([this] { ledger_.settle(); });
  if (components_.task) run_log_->count_predictions(components_.task->throughput(components_.train->sample_shape()));
  checkpointer_.settle_before_saving_with([this] { ledger_.settle(); });
  callbacks_.push_back({run_log_, "progress", "mixt", ""});
  callbacks_.insert(callbacks_.end(), components_.callbacks.begin(), components_.callbacks.end());
  grad_norm_every_step_ = options_.grad_norm == "every_step";
  for (const NamedCallback& c : callbacks_) grad_norm_every_step_ |= c.callback->reads_grad_norm_every_step();
}

void Trainer::write_to(RunDirectory* run) {
  recovery_.write_to(run);
  run_log_->write_to(run);
}

void Trainer::add_callback(std::shared_ptr<Callback> callback, std::string name) {
  grad_norm_every_step_ |= callback->reads_grad_norm_every_step();
  callbacks_.push_back({std::move(callback), std::move(name), "mixt", ""});
}

void Trainer::resume(const fs::path& checkpoint, bool check_data_order) {
  Checkpointer::Resumed resumed = checkpointer_.resume(checkpoint, check_data_order);
  data_.resume_at(std::move(resumed.data_positions));
  recovery_.resumed_from(resumed.file);
  run_log_->note("resumed from " + resumed.file.string() + " at epoch " + std::to_string(state_.epoch + 1) + ", step " +
                 std::to_string(state_.global_step));
  // trainer.epochs is the total, not how many more: a lower one would end the run at once.
  if (finished()) {
    warn("the checkpoint has finished " + std::to_string(state_.epoch) +
         " epochs and trainer.epochs (the total, not how many more) is " + std::to_string(options_.epochs) +
         ": nothing left to train; to go on, raise trainer.epochs above " + std::to_string(state_.epoch));
  }
}

TrainResult Trainer::fit() {
  TrainResult result;
  result.throughput = run_log_->throughput();
  const auto started = Clock::now();
  const auto warnings_in_log = run_log_->capture_warnings();  // the run's warnings in log.txt and metrics.jsonl too
  coordinator_.broadcast_model(*components_.model);           // every rank starts from rank 0's weights
  loss_.decide_path();  // it reads the weights, which sharding: parameters releases next
  if (components_.optimizer_shards) components_.optimizer_shards->start_from_full();
  const FitStart fit{state_, recovery_.run_path(), coordinator_.rank(), coordinator_.world_size()};
  notify("on_fit_start", [&](Callback& callback) { callback.on_fit_start(fit); });
  for (; state_.epoch < options_.epochs; ++state_.epoch) {
    const std::int64_t steps_before = result.optimizer_steps, skipped_before = result.skipped_steps;
    const std::int64_t bad_before = bad_samples_of(components_.train.get()) + bad_samples_of(components_.val.get());
    bool mid_epoch = false;  // a callback's stop request ended the epoch early
    try {
      mid_epoch = train_epoch(result);
    } catch (const Error& failure) {
      // Sharded optimizer state: the failed rank's shard cannot be saved, so the newest
      // complete checkpoint stays the one to resume from.
      if (components_.optimizer_shards) throw;
      throw recovery_.with_progress_saved(failure, batches_in_weights_, options_.accumulate,
                                          [this] { return stops_.weights_good(); });
    }
    // The epoch's end reads the weights (checksum, checkpoint, evaluation): whole meanwhile.
    const WholeModel whole(components_.optimizer_shards);
    stops_.check_loss_finite();
    stops_.check_weights_finite();
    warn_if_most_steps_were_skipped(state_.epoch, result.optimizer_steps - steps_before,
                                    result.skipped_steps - skipped_before);
    const Stop stop = end_epoch(result, mid_epoch, bad_before, started);
    if (stop == Stop::interrupt) stop_at_epoch_end(/*evaluation_skipped=*/false);
    if (stop == Stop::end_run) {
      report_early_end(result, mid_epoch);
      if (!mid_epoch) ++state_.epoch;  // the next to start, as after the last epoch
      break;
    }
  }
  // What follows the run (its callbacks' end, the experiment's reports) sees the whole model.
  if (components_.optimizer_shards) {
    if (const std::string report = components_.optimizer_shards->report(); !report.empty()) run_log_->note(report);
    components_.optimizer_shards->gather_whole_model();
  }
  notify("on_fit_end", [&](Callback& callback) { callback.on_fit_end(state_); });
  result.elapsed_seconds = seconds_since(started);
  return result;
}

bool Trainer::train_epoch(TrainResult& result) {
  Dataset& data = *components_.train;
  batches_in_weights_ = state_.batches_in_epoch;            // what a failure before the first step keeps
  const std::int64_t bad_at_start = bad_samples_of(&data);  // before start(): the workers start decoding
  data_.start(state_.epoch, state_.batches_in_epoch);
  EpochRun epoch;
  epoch.step = state_.batches_in_epoch / options_.accumulate;
  epoch.steps = steps_per_epoch();
  const std::int64_t first_step = epoch.step, skipped_at_start = state_.skipped_steps;
  const EpochStart epoch_start{state_, epoch.steps, first_step};
  notify("on_epoch_start", [&](Callback& callback) { callback.on_epoch_start(epoch_start); });
  components_.model->train();

  epoch.started = Clock::now();
  bool ended_early = false;
  while (epoch.step < epoch.steps && epoch.data_left) {
    const std::optional<Stop> stop = train_step(epoch, result);
    if (!stop) break;  // the data ran out before the step's first micro-batch
    if (*stop == Stop::interrupt) stop_mid_epoch(epoch.step);
    if (*stop == Stop::end_run) {
      ended_early = epoch.step < epoch.steps && epoch.data_left;
      break;
    }
  }
  ledger_.settle();
  if (epoch.step == first_step && first_step < epoch.steps) nothing_trained(data, bad_at_start);
  result.skipped_steps += state_.skipped_steps - skipped_at_start;
  result.samples += epoch.samples * coordinator_.world_size();
  result.train_seconds += seconds_since(epoch.started);
  return ended_early;
}

// One optimizer step, as mixt/precision.h lists it (the one listing), with the trainer's
// parts in between: the gradients averaged over ranks and measured, then the agreement on
// the step, its callbacks and the stop decision.
std::optional<Stop> Trainer::train_step(EpochRun& epoch, TrainResult& result) {
  PrecisionPolicy& precision = *components_.precision;
  Optimizer& optimizer = *components_.optimizer;
  const bool logged = (epoch.step + 1) % options_.log_every == 0;
  precision.begin_step(state_.global_step + 1, logged);
  optimizer.zero_grad();
  const at::Tensor loss = forward_and_backward(epoch);
  if (!loss.defined()) return std::nullopt;
  coordinator_.average_gradients();  // before the policy sees them: every rank steps on the same numbers
  precision.gradients_ready(optimizer);
  if (components_.optimizer_shards) components_.optimizer_shards->take_gradients();  // this rank's 1/N
  const at::Tensor grad_norm = measure_and_clip(logged);
  // Possibly decided on the device (a sync-free loss-scaled step): read below only where
  // the host needs it, i.e. for the scheduler and for callbacks that ask.
  const StepOutcome applied = precision.step(optimizer);
  precision.update();
  if (components_.scheduler && applied.applied()) components_.scheduler->step();
  ++epoch.step;
  ++state_.global_step;
  return after_step(epoch, result, applied, loss, grad_norm, logged);
}

// The step's micro-batches (trainer.accumulate): forward, loss, backward. Returns the
// step's mean loss per micro-batch, undefined when the data ran out before the first.
at::Tensor Trainer::forward_and_backward(EpochRun& epoch) {
  at::Tensor loss_sum;
  std::int64_t micro_batches = 0;
  for (; micro_batches < options_.accumulate; ++micro_batches) {
    std::optional<Batch> batch = components_.train->next_batch();
    if (!batch) {
      epoch.data_left = false;
      break;
    }
    const at::Tensor inputs = model_input(components_, facts_, batch->inputs);
    const at::Tensor targets = batch->targets.to(facts_.device, /*non_blocking=*/true);
    const at::Tensor loss = loss_(inputs, targets, state_.epoch, epoch.step);
    const bool last = micro_batches + 1 == options_.accumulate;
    coordinator_.prepare_backward(last);
    if (components_.optimizer_shards) components_.optimizer_shards->prepare_backward(last);
    components_.precision->backward(loss);
    loss_sum = loss_sum.defined() ? loss_sum + loss.detach() : loss.detach();
    epoch.samples += inputs.size(0);
    ++state_.batches_in_epoch;
  }
  // The sum of (loss / accumulate) terms is the mean unless the step had fewer micro-batches
  // (the epoch's ragged end).
  if (micro_batches == 0 || micro_batches == options_.accumulate) return loss_sum;
  return loss_sum.to(at::kDouble).mul(static_cast<double>(options_.accumulate)).div(static_cast<double>(micro_batches));
}

// The gradient norm (StepEnd::grad_norm) where clipping, the log or trainer.grad_norm needs
// it, of unscaled gradients, and clipping by it: all on the device.
at::Tensor Trainer::measure_and_clip(bool logged) {
  if (options_.clip_grad_norm <= 0 && !logged && !grad_norm_every_step_) return {};
  components_.precision->unscale(*components_.optimizer);
  const std::vector<at::Tensor> parameters = components_.optimizer->parameters();
  at::Tensor norm = gradient_norm(parameters);
  if (components_.optimizer_shards) norm = components_.optimizer_shards->norm_over_ranks(norm);
  if (options_.clip_grad_norm > 0 && norm.defined()) clip_gradients(parameters, norm, options_.clip_grad_norm);
  return norm;
}

void Trainer::save_ranks_parts(const fs::path& rank_0_file) {
  if (!components_.optimizer_shards) return;
  const fs::path file = coordinator_.text_from(0, rank_0_file.string());
  if (!file.empty()) {
    components_.optimizer_shards->save_shard(file);
    for (const NamedCallback& c : callbacks_) {
      if (auto* gathers = dynamic_cast<GathersForCheckpoint*>(c.callback.get())) {
        c.guarded("gather_for_checkpoint", [&] { gathers->gather_for_checkpoint(); });
      }
    }
  }
  coordinator_.barrier();  // every shard is written before rank 0's file names them
}

// After the optimizer step: its bookkeeping, the ranks' agreement on its loss, the
// callbacks' on_step_end and whether the run goes on.
Stop Trainer::after_step(EpochRun& epoch, TrainResult& result, const StepOutcome& applied, const at::Tensor& loss,
                         const at::Tensor& grad_norm, bool logged) {
  ledger_.count(applied, facts_.device);
  // After this process's first step, a resumed run's too (global_step is not 1 then).
  if (++result.optimizer_steps == 1) check_listed_submodules_routed(components_, facts_);
  batches_in_weights_ = state_.batches_in_epoch;  // from here a failure keeps this step
  const StepAgreement agreed = coordinator_.agree_on_step(loss);
  if (options_.stop_on_nonfinite_loss) ledger_.watch_loss(agreed.loss, agreed.on_host, applied, state_.global_step);
  if (logged || agreed.on_host) ledger_.settle();  // the loss is read there: one more copy costs nothing
  const StepEnd end{state_,
                    epoch.step,
                    epoch.steps,
                    applied,
                    agreed.loss,
                    components_.optimizer->learning_rate(),
                    *components_.precision,
                    epoch.samples * coordinator_.world_size(),
                    seconds_since(epoch.started),
                    logged,
                    stops_.control(),
                    grad_norm};
  notify("on_step_end", [&](Callback& callback) { callback.on_step_end(end); });
  // The loss was read where it is shown, logged or agreed: checking it costs one more scalar.
  return stops_.after_step(agreed.on_host || end.logged);
}

// Every batch passed over (each sample bad): nothing was trained, and a run of such epochs
// would end "done" with exit 0.
void Trainer::nothing_trained(Dataset& data, std::int64_t bad_at_start) const {
  const std::int64_t bad = bad_samples_of(&data) - bad_at_start;
  if (bad > 0) {
    throw runtime_error("data.train gave no usable sample in epoch " + std::to_string(state_.epoch + 1) + ": all " +
                            std::to_string(bad) + " were skipped as bad (the warnings above name the first)",
                        "fix or remove the files named in the warnings");
  }
  throw runtime_error("data.train delivered no batch in epoch " + std::to_string(state_.epoch + 1) +
                          " although it has " + std::to_string(data.batches_per_epoch()) + " batches per epoch",
                      "a dataset's next_batch() must deliver batches_per_epoch() batches (mixt/dataset.h)");
}

std::int64_t Trainer::steps_per_epoch() const {
  return options_.steps_per_epoch(components_.train->batches_per_epoch());
}

}  // namespace mixt
