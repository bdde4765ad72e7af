#include "trainer.h"

#include <ATen/autocast_mode.h>
#include <torch/nn/utils/clip_grad.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "checkpoint.h"
#include "distributed/data_parallel.h"
#include "interrupt.h"
#include "mixt/data_loader.h"
#include "mixt/fp32_modules.h"
#include "mixt/version.h"
#include "out_of_memory.h"
#include "state_dict_check.h"

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

// Samples a LoaderDataset has skipped as bad since it was made (datasets of another kind
// have no such samples).
std::int64_t bad_samples(Dataset* data) {
  auto* loader_dataset = dynamic_cast<LoaderDataset*>(data);
  return loader_dataset ? loader_dataset->loader().bad_samples() : 0;
}

bool parameters_finite(Model& model) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> finite;
  for (const at::Tensor& p : model.parameters()) finite.push_back(at::isfinite(p).all());
  return finite.empty() || at::stack(finite).all().item<bool>();
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

Trainer::Trainer(Components& components, TrainerOptions options, RunDirectory* run, Progress& progress,
                 distributed::DataParallel* parallel)
    : c_(components), options_(std::move(options)), run_(run), progress_(progress), parallel_(parallel) {
  if (parallel_) parallel_->set_parameters(c_.model->parameters(/*recurse=*/true));
}

TrainResult Trainer::fit() {
  TrainResult result;
  const auto start = Clock::now();
  // Data parallel: every rank starts from rank 0's parameters and buffers.
  if (parallel_) parallel_->broadcast_model(*c_.model);
  for (; epoch_ < options_.epochs; ++epoch_) {
    const std::int64_t steps_before = result.optimizer_steps, skipped_before = result.skipped_steps;
    const std::int64_t bad_before = bad_samples(c_.train.get()) + bad_samples(c_.val.get());
    try {
      train_epoch(epoch_, result);
    } catch (const Error& failure) {
      throw with_progress_saved(failure);
    }
    check_loss_finite(epoch_);
    check_weights_finite(epoch_);
    warn_if_every_step_was_skipped(epoch_, result.optimizer_steps - steps_before,
                                   result.skipped_steps - skipped_before);
    // The epoch's checkpoint comes before its evaluation, so an evaluation that fails (a bad
    // validation file under on_bad_sample: fail) does not cost the epoch's training.
    batches_in_epoch_ = 0;
    if (parallel_) parallel_->check_in_sync(*c_.model, "after epoch " + std::to_string(epoch_ + 1));
    finish_epoch_checkpoint(epoch_);
    if (parallel_) parallel_->barrier();  // rank 0's checkpoint is written before any rank goes on
    // Every epoch ends with a line (terminal and log.txt) and an "epoch" event in
    // metrics.jsonl, with the validation figures when there is validation data.
    char line[256];
    nlohmann::json event = {{"event", "epoch"}, {"epoch", epoch_ + 1}, {"step", global_step_}};
    if (c_.val) {
      const Evaluation eval = evaluate(*c_.val);
      if (eval.interrupted) stop_at_epoch_end(epoch_, /*evaluation_skipped=*/true);
      // A NaN score would read as a result; the epoch's checkpoint is written already.
      if (eval.samples == 0) {
        throw runtime_error("data.val gave no usable sample after epoch " + std::to_string(epoch_ + 1) +
                                ": every one was skipped as bad (the warnings above name the first); the epoch's "
                                "checkpoint is written",
                            "fix or remove the files, then continue with trainer.resume; data.val=null trains "
                            "without validation");
      }
      result.final_eval = eval;
      std::snprintf(line, sizeof(line), "epoch %lld/%lld: val loss %.4f, val top-1 %.2f%% (%lld samples), %.1fs",
                    static_cast<long long>(epoch_ + 1), static_cast<long long>(options_.epochs), eval.loss,
                    100.0 * eval.top1, static_cast<long long>(eval.samples), seconds_since(start));
      event["val_loss"] = eval.loss;
      event["val_top1"] = eval.top1;
    } else {
      std::snprintf(line, sizeof(line), "epoch %lld/%lld done, %.1fs", static_cast<long long>(epoch_ + 1),
                    static_cast<long long>(options_.epochs), seconds_since(start));
    }
    // Skipped samples are named once in a warning; their count goes with every epoch.
    std::int64_t bad = bad_samples(c_.train.get()) + bad_samples(c_.val.get()) - bad_before;
    if (parallel_) bad = static_cast<std::int64_t>(parallel_->sum({static_cast<double>(bad)})[0]);
    if (bad > 0) {
      const std::size_t used = std::strlen(line);
      std::snprintf(line + used, sizeof(line) - used, ", %lld bad samples skipped", static_cast<long long>(bad));
      event["bad_samples"] = bad;
      result.bad_samples += bad;
    }
    event["elapsed_s"] = seconds_since(start);
    progress_.end_epoch(line);
    if (run_) {
      run_->append_log(line);
      run_->append_metrics(event);
    }
    if (epoch_ + 1 < options_.epochs && stop_requested_at_epoch_end()) stop_at_epoch_end(epoch_, false);
  }
  result.elapsed_seconds = seconds_since(start);
  return result;
}

// A stop asked for during an evaluation or a checkpoint: the epoch's checkpoint is written,
// so stopping here loses nothing, where going on would wait for one more training step
// (and, before it, the rest of an evaluation that may take minutes).
bool Trainer::stop_requested_at_epoch_end() const {
  double stop = interrupt_requested() ? 1.0 : 0.0;
  if (parallel_) stop = parallel_->sum({stop})[0];
  return stop > 0;
}

void Trainer::stop_at_epoch_end(std::int64_t epoch, bool evaluation_skipped) {
  if (run_) {
    char name[32];
    std::snprintf(name, sizeof(name), "epoch-%04lld", static_cast<long long>(epoch + 1));
    progress_.note(std::string("\ninterrupted") + (evaluation_skipped ? " during the evaluation" : "") +
                   " after epoch " + std::to_string(epoch + 1) + ": its checkpoint is " +
                   (run_->checkpoints() / name).string() + " (continue with trainer.resume=" +
                   run_->path().string() + ")");
    run_->append_log(std::string("interrupted") + (evaluation_skipped ? " during the evaluation" : "") +
                     " after epoch " + std::to_string(epoch + 1) + ": checkpoint " +
                     (run_->checkpoints() / name).string());
  }
  throw Error(ErrorKind::interrupted, "interrupted");
}

// One epoch. The optimizer step below is the precision contract of mixt/precision.h,
// top to bottom: autocast forward, policy backward, optional unscale + clip, policy step,
// policy update, scheduler only when the step was applied.
void Trainer::train_epoch(std::int64_t epoch, TrainResult& result) {
  Dataset& data = *c_.train;
  Model& model = *c_.model;
  PrecisionPolicy& precision = *c_.precision;
  Optimizer& optimizer = *c_.optimizer;
  const at::DeviceType device_type = c_.device.type();
  const std::int64_t accumulate = options_.accumulate;

  std::int64_t steps = (data.batches_per_epoch() + accumulate - 1) / accumulate;
  if (options_.max_steps_per_epoch > 0) steps = std::min(steps, options_.max_steps_per_epoch);

  batches_in_weights_ = batches_in_epoch_;  // what a failure before the first step keeps
  const std::int64_t bad_at_start = bad_samples(&data);  // before start_data: the workers start decoding
  start_data(data, epoch);
  std::int64_t step = batches_in_epoch_ / accumulate;
  progress_.start_epoch(epoch, options_.epochs, steps, step);
  model.train();

  const std::int64_t first_step = step;
  const auto epoch_start = Clock::now();
  std::int64_t epoch_samples = 0;
  bool data_left = true;
  while (step < steps && data_left) {
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
      const at::Tensor targets = batch->targets.to(c_.device, /*non_blocking=*/true);
      at::Tensor loss;
      try {
        AutocastScope scope = precision.autocast(device_type);
        const at::Tensor logits = model.forward(inputs);
        loss = at::cross_entropy_loss(logits, targets, {}, at::Reduction::Mean, -100, options_.label_smoothing);
        // Only when accumulating: dividing by 1 is exact but costs a kernel and a backward node.
        if (accumulate > 1) loss = loss / static_cast<double>(accumulate);
      } catch (const c10::Error& e) {
        forward_failed(e, epoch, step, inputs);
      }
      if (parallel_) parallel_->prepare_backward(micro_batches + 1 == accumulate);
      precision.backward(loss);
      loss_sum = loss_sum.defined() ? loss_sum + loss.detach() : loss.detach();
      epoch_samples += inputs.size(0);
      ++batches_in_epoch_;
    }
    if (micro_batches == 0) break;
    // Data parallel: average the gradients over ranks (bucketed all-reduce) before the
    // policy sees them, so every rank unscales, clips and steps on the same numbers.
    if (parallel_) parallel_->average_gradients();

    if (options_.clip_grad_norm > 0) {
      precision.unscale(optimizer);
      torch::nn::utils::clip_grad_norm_(optimizer.parameters(), options_.clip_grad_norm);
    }
    const bool applied = precision.step(optimizer);
    precision.update();
    if (applied && c_.scheduler) c_.scheduler->step();
    if (!applied) {
      ++skipped_steps_;
      ++result.skipped_steps;
    }
    // After this process's first step, a resumed run's too (global_step_ is not 0 then).
    if (result.optimizer_steps == 0) check_fp32_modules_routed(model, c_.fp32_modules_where);
    ++step;
    ++global_step_;
    ++result.optimizer_steps;
    // From here a failure (a peer lost in the all-reduce below) keeps this step.
    batches_in_weights_ = batches_in_epoch_;
    // A skipped step's inf/NaN loss is the policy's business (a loss scaler backs off); an
    // applied one has put inf/NaN into the weights. Data parallel: the mean loss below.
    if (applied && !parallel_ && options_.stop_on_nonfinite_loss) loss_watch_.observe(loss_sum, global_step_);
    if (step_observer_) step_observer_(global_step_, loss_sum);

    bool stop = interrupt_requested();
    double mean_loss = NAN;  // over ranks; known every step only in a data-parallel run
    if (parallel_) {
      // One small all-reduce per step: the logged loss is the mean over ranks, and a stop
      // request on any rank stops every rank after this same step.
      const double local = loss_sum.item<double>() * static_cast<double>(accumulate) /
                           static_cast<double>(micro_batches);
      const std::vector<double> sums = parallel_->sum({local, stop ? 1.0 : 0.0});
      mean_loss = sums[0] / parallel_->world_size();
      stop = sums[1] > 0;
      // Every rank sees the same mean and the same `applied`, so every rank stops here.
      if (applied && options_.stop_on_nonfinite_loss) {
        loss_watch_.observe(mean_loss, global_step_);
        check_loss_finite(epoch);
      }
    }
    // wants() throttles terminal redraws, so ask it once per step.
    const bool show = progress_.wants(step);
    if (show || step % options_.log_every == 0) {
      // Scale back a partial accumulation so the shown loss is per-sample comparable.
      const double loss_value = parallel_ ? mean_loss
                                          : loss_sum.item<double>() * static_cast<double>(accumulate) /
                                                static_cast<double>(micro_batches);
      const double samples_per_second = static_cast<double>(epoch_samples) * world_size() /
                                        seconds_since(epoch_start);
      if (show) progress_.show(step, loss_value, samples_per_second, step_metrics());
      if (step % options_.log_every == 0) {
        log_step(epoch, step, loss_value, samples_per_second, seconds_since(epoch_start));
      }
      check_loss_finite(epoch);  // the loss was read just now: one more scalar costs nothing
    }
    if (stop) {
      check_loss_finite(epoch);  // never a checkpoint of inf/NaN weights
      check_weights_finite(epoch);
      // Every rank takes part. A rank lost since the stop was agreed must not cost rank 0
      // its checkpoint: save without positions (a resume then replays those batches) and
      // let the barrier below report the failure.
      std::vector<std::int64_t> positions;
      try {
        positions = data_positions();
      } catch (const std::exception&) {  // positions stay empty
      }
      if (run_) {
        const fs::path file = run_->checkpoints() / "interrupted";
        save_checkpoint(file, positions);
        progress_.note("\ninterrupted: checkpoint written to " + file.string() +
                       " (continue with trainer.resume=" + run_->path().string() + ")");
        run_->append_log("interrupted after step " + std::to_string(step) + " of epoch " + std::to_string(epoch + 1) +
                         " (global step " + std::to_string(global_step_) + "): checkpoint " + file.string());
      }
      if (parallel_) parallel_->barrier();
      throw Error(ErrorKind::interrupted, "interrupted");
    }
  }
  // Every batch passed over (each sample bad): nothing was trained, and a run of such
  // epochs would end "done" with exit 0.
  if (step == first_step && first_step < steps) {
    const std::int64_t bad = bad_samples(&data) - bad_at_start;
    if (bad > 0) {
      throw runtime_error("data.train gave no usable sample in epoch " + std::to_string(epoch + 1) + ": all " +
                              std::to_string(bad) + " were skipped as bad (the warnings above name the first)",
                          "fix or remove the files named in the warnings");
    }
    throw runtime_error("data.train delivered no batch in epoch " + std::to_string(epoch + 1) + " although it has " +
                            std::to_string(data.batches_per_epoch()) + " batches per epoch",
                        "a dataset's next_batch() must deliver batches_per_epoch() batches (mixt/dataset.h)");
  }
  result.samples += epoch_samples * world_size();
  result.train_seconds += seconds_since(epoch_start);
}

// A runtime failure mid-epoch (a bad file under on_bad_sample: fail, a batch the model
// cannot take, a rank lost) need not cost the epoch's steps: the weights are those of the
// last completed step, so they are saved as `interrupted`, which resuming the run directory
// continues from (the failed step's micro-batches are trained again). Data parallel: rank
// 0's weights are the run's whichever rank failed, since no step is applied without the
// gradient all-reduce of every rank. Not when the weights are broken (a non-finite loss or
// parameter: in a data-parallel run the last step's mean loss may not be known), when
// nothing of the epoch is done, or when the checkpoint cannot be written either (a full disk).
Error Trainer::with_progress_saved(const Error& failure) {
  if (failure.kind() != ErrorKind::runtime || !run_ || batches_in_weights_ == 0) return failure;
  if (loss_watch_.first_step() || !parameters_finite(*c_.model)) return failure;
  const std::int64_t steps = batches_in_weights_ / options_.accumulate;
  batches_in_epoch_ = batches_in_weights_;
  const fs::path file = run_->checkpoints() / "interrupted";
  try {
    save_checkpoint(file);  // no loader positions: a resume replays the epoch's batches up to here
  } catch (const std::exception&) {
    return failure;
  }
  const std::string saved = "the " + std::to_string(steps) + " completed steps of epoch " + std::to_string(epoch_ + 1) +
                            " are saved in " + file.string() + ": once fixed, continue with trainer.resume=" +
                            run_->path().string();
  return Error(failure.kind(), failure.message(), failure.where(), failure.key_path(),
               failure.hint().empty() ? saved : failure.hint() + "\n  " + saved);
}

// Resuming mid-epoch: the order of an epoch depends only on seed and epoch, so going past
// the batches already trained on puts the run exactly where the interrupted one stopped.
// A LoaderDataset (image folders: seconds of JPEG decoding per batch) starts at the saved
// position without building them; any other dataset replays them through next_batch(),
// which costs little for in-memory data. Each rank's position is saved, and each rank
// restarts at its own: they are equal today (with several ranks a batch of only bad
// samples is an error, not a skip), but a loader is per shard and nothing here assumes it.
void Trainer::start_data(Dataset& data, std::int64_t epoch) {
  auto* loader_dataset = dynamic_cast<LoaderDataset*>(&data);
  const auto rank = static_cast<std::size_t>(parallel_ ? parallel_->rank() : 0);
  const bool saved = resume_data_positions_.size() == static_cast<std::size_t>(world_size());
  if (batches_in_epoch_ > 0 && loader_dataset && saved) {
    loader_dataset->loader().start_epoch(epoch, resume_data_positions_[rank]);
  } else {
    data.start_epoch(epoch);
    for (std::int64_t skip = 0; skip < batches_in_epoch_; ++skip) data.next_batch();
  }
  resume_data_positions_.clear();
}

std::vector<std::int64_t> Trainer::data_positions() const {
  auto* loader_dataset = dynamic_cast<LoaderDataset*>(c_.train.get());
  if (!loader_dataset) return {};
  const std::int64_t position = loader_dataset->loader().position();
  if (!parallel_) return {position};
  // Gathered as a sum of one-hot slots: DataParallel::sum is the collective there is.
  std::vector<double> slots(static_cast<std::size_t>(parallel_->world_size()), 0.0);
  slots[static_cast<std::size_t>(parallel_->rank())] = static_cast<double>(position);
  std::vector<std::int64_t> positions;
  for (const double p : parallel_->sum(slots)) positions.push_back(static_cast<std::int64_t>(p));
  return positions;
}

at::Tensor Trainer::to_device(const at::Tensor& inputs) const {
  at::Tensor moved = inputs.to(c_.device, /*non_blocking=*/true);
  if (options_.channels_last && moved.dim() == 4) moved = moved.contiguous(at::MemoryFormat::ChannelsLast);
  return moved;
}
std::int64_t Trainer::world_size() const { return parallel_ ? parallel_->world_size() : 1; }

void Trainer::log_step(std::int64_t epoch, std::int64_t step, double loss, double samples_per_second,
                       double epoch_seconds) {
  if (!run_) return;
  nlohmann::json line = {{"event", "step"},
                         {"epoch", epoch + 1},
                         {"step", global_step_},
                         {"epoch_step", step},
                         {"loss", loss},
                         {"lr", c_.optimizer->learning_rate()},
                         {"samples_per_s", samples_per_second},
                         {"epoch_elapsed_s", epoch_seconds}};
  for (const auto& [name, value] : step_metrics()) line[name] = value;
  run_->append_metrics(line);
}

void Trainer::check_loss_finite(std::int64_t epoch) const {
  if (!options_.stop_on_nonfinite_loss) return;
  const std::optional<std::int64_t> step = loss_watch_.first_step();
  if (!step) return;
  const std::string saved = newest_good_checkpoint("it");
  throw runtime_error("the training loss became inf or NaN at step " + std::to_string(*step) + " (epoch " +
                          std::to_string(epoch + 1) + "); the weights are no longer usable, so training stopped and " +
                          saved,
                      "lower optimizer.lr, clip gradients (trainer.clip_grad_norm), or use a loss-scaling precision "
                      "policy; trainer.stop_on_nonfinite_loss=false trains on regardless");
}

std::string Trainer::newest_good_checkpoint(const std::string& before_what) const {
  if (run_ && fs::exists(run_->checkpoints() / "last")) {
    return "the newest checkpoint (" + (run_->checkpoints() / "last").string() + ") is from before " + before_what;
  }
  if (!resumed_from_.empty()) {
    return "no checkpoint was written from them; the one this run resumed from (" + resumed_from_.string() +
           ") is from before " + before_what;
  }
  return "no checkpoint was written from them";
}

// The loss watch sees applied steps only. A step applied with gradients that were not
// finite (a loss scale of 0 turns them into inf * 0 = NaN after the policy's finite check)
// breaks the weights with every loss finite, then the policy skips every later step: the
// weights themselves are checked once per epoch, before its checkpoint.
void Trainer::check_weights_finite(std::int64_t epoch) const {
  if (!options_.stop_on_nonfinite_loss || parameters_finite(*c_.model)) return;
  const std::string saved = newest_good_checkpoint("them");
  throw runtime_error("the weights hold inf or NaN after epoch " + std::to_string(epoch + 1) +
                          " although every applied step's loss was finite; training stopped and " + saved,
                      "a step was applied with non-finite gradients: check the precision policy's options (a loss "
                      "scale near 0 or float32's limits) and optimizer.lr; trainer.stop_on_nonfinite_loss=false "
                      "trains on regardless");
}

// A policy that skips every step (a static loss scale that always overflows, a learning
// rate that makes every gradient inf) leaves the weights as they were: the run would end
// "done" with exit 0 and nothing learned.
void Trainer::warn_if_every_step_was_skipped(std::int64_t epoch, std::int64_t steps, std::int64_t skipped) {
  if (steps == 0 || skipped < steps) return;
  const std::string line = "mixt: warning: the precision policy skipped every step of epoch " +
                           std::to_string(epoch + 1) + " (" + std::to_string(skipped) +
                           " of them: inf/NaN gradients each time), so the weights did not change; lower "
                           "optimizer.lr or check the loss scaler's options";
  progress_.note(line);
  if (run_) run_->append_log(line);
}

// The policy's own numbers (e.g. loss_scale) and the steps it skipped so far.
std::vector<std::pair<std::string, double>> Trainer::step_metrics() const {
  auto metrics = c_.precision->metrics();
  metrics.emplace_back("skipped_steps", static_cast<double>(skipped_steps_));
  return metrics;
}

Evaluation Trainer::evaluate(Dataset& dataset) {
  Model& model = *c_.model;
  model.eval();
  at::NoGradGuard no_grad;
  dataset.start_epoch(0);
  at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(c_.device));
  at::Tensor correct = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(c_.device));
  std::int64_t samples = 0;
  while (std::optional<Batch> batch = dataset.next_batch()) {
    // Ctrl-C: the epoch's checkpoint is written before its evaluation, so stop now. Data
    // parallel: every rank finishes, since the evaluation ends in a collective; the stop
    // is agreed on at the epoch's end.
    if (!parallel_ && interrupt_requested()) {
      model.train();
      Evaluation stopped;
      stopped.interrupted = true;
      return stopped;
    }
    const at::Tensor inputs = to_device(batch->inputs);
    const at::Tensor targets = batch->targets.to(c_.device, true);
    AutocastScope scope = c_.precision->autocast(c_.device.type());
    const at::Tensor logits = model.forward(inputs);
    loss_sum += at::cross_entropy_loss(logits.to(at::kFloat), targets, {}, at::Reduction::Sum).to(at::kDouble);
    correct += logits.argmax(1).eq(targets).sum();
    samples += inputs.size(0);
  }
  model.train();
  double total_loss = loss_sum.item<double>();
  auto total_correct = static_cast<double>(correct.item<std::int64_t>());
  auto total_samples = static_cast<double>(samples);
  if (parallel_) {  // each rank evaluated its shard
    const std::vector<double> sums = parallel_->sum({total_loss, total_correct, total_samples});
    total_loss = sums[0];
    total_correct = sums[1];
    total_samples = sums[2];
  }
  Evaluation eval;
  eval.samples = static_cast<std::int64_t>(total_samples);
  if (total_samples > 0) {
    eval.loss = total_loss / total_samples;
    eval.top1 = total_correct / total_samples;
  }
  return eval;
}

void Trainer::save_checkpoint(const fs::path& file, const std::vector<std::int64_t>& data_positions) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive, optimizer_archive, precision_archive, trainer_archive;
  c_.model->save(model_archive);
  c_.optimizer->save(optimizer_archive);
  c_.precision->save(precision_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("precision", precision_archive);
  if (c_.scheduler) {
    torch::serialize::OutputArchive scheduler_archive;
    c_.scheduler->save(scheduler_archive);
    archive.write("scheduler", scheduler_archive);
  }
  at::Tensor rng;
  {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    rng = generator.get_state();
  }
  trainer_archive.write("epoch", c10::IValue(epoch_));
  trainer_archive.write("batches_in_epoch", c10::IValue(batches_in_epoch_));
  if (!data_positions.empty()) trainer_archive.write("data_positions", c10::IValue(data_positions));
  trainer_archive.write("global_step", c10::IValue(global_step_));
  trainer_archive.write("skipped_steps", c10::IValue(skipped_steps_));
  trainer_archive.write("cpu_rng_state", rng);
  trainer_archive.write("data_order", c10::IValue(data_order()));
  archive.write("trainer", trainer_archive);

  nlohmann::json header = {{"mixt", version()},
                           {"torch", TORCH_VERSION},
                           {"epoch", epoch_},
                           {"batches_in_epoch", batches_in_epoch_},
                           {"global_step", global_step_},
                           {"skipped_steps", skipped_steps_},
                           {"components", nlohmann::json::array()}};
  if (!data_positions.empty()) header["data_positions"] = data_positions;
  for (const auto& r : c_.records) {
    header["components"].push_back({{"kind", r.kind}, {"name", r.name}, {"plugin", r.plugin},
                                    {"plugin_version", r.plugin_version}});
  }
  write_checkpoint(file, header, archive);
}

// What the position of a mid-epoch checkpoint (batches_in_epoch_) counts in: the same
// text means the same epoch order, batch for batch.
std::string Trainer::data_order() const {
  std::string dataset;
  for (const auto& r : c_.records) {
    if (r.kind == "dataset") {
      dataset = "'" + r.name + "' of ";  // data.train's is recorded first
      break;
    }
  }
  return dataset + std::to_string(c_.train->size()) + " samples in " +
         std::to_string(c_.train->batches_per_epoch()) + " batches per rank, " + std::to_string(world_size()) +
         (world_size() == 1 ? " rank" : " ranks") + ", seed " + std::to_string(options_.seed) + ", accumulate " +
         std::to_string(options_.accumulate) + (c_.train_order_keys.empty() ? "" : ", " + c_.train_order_keys);
}

void Trainer::finish_epoch_checkpoint(std::int64_t epoch) {
  if (!run_) return;
  char name[32];
  std::snprintf(name, sizeof(name), "epoch-%04lld", static_cast<long long>(epoch + 1));
  const fs::path directory = run_->checkpoints();
  // epoch_ is advanced by the caller after this; the checkpoint must say "start at the next".
  ++epoch_;
  save_checkpoint(directory / name);
  --epoch_;
  // `last` is a symlink replaced atomically (a new link renamed over the old one).
  const fs::path link = directory / "last";
  const fs::path temporary = directory / "last.tmp";
  std::error_code ec;
  fs::remove(temporary, ec);
  fs::create_symlink(name, temporary);
  fs::rename(temporary, link);
  // Keep the newest k per-epoch checkpoints.
  if (epoch + 1 > options_.keep_checkpoints) {
    std::snprintf(name, sizeof(name), "epoch-%04lld", static_cast<long long>(epoch + 1 - options_.keep_checkpoints));
    fs::remove(directory / name, ec);
  }
  fs::remove(directory / "interrupted", ec);
}

void Trainer::resume(const fs::path& path, bool check_data_order) {
  const fs::path file = resolve_checkpoint(path);
  CheckpointContents contents = read_checkpoint(file, c_.device);
  // The components must be the ones that wrote it: other names mean other tensors.
  const auto& saved = contents.header.value("components", nlohmann::json::array());
  for (const auto& r : c_.records) {
    bool found = false;
    std::string written_with;  // the checkpoint's component of this kind, to name it
    for (const auto& s : saved) {
      if (s.value("kind", "") != r.kind) continue;
      if (s.value("name", "") == r.name) found = true;
      written_with = s.value("name", "");
    }
    if (!found && r.kind != "dataset") {
      throw Error(ErrorKind::recipe,
                  "checkpoint was written by a run with " +
                      (written_with.empty() ? "no " + r.kind : r.kind + " '" + written_with + "'") +
                      ", this recipe has " + r.kind + " '" + r.name + "'",
                  SourceLocation{file.string()}, "trainer.resume",
                  "resume with the recipe that wrote it (its run directory has recipe.yaml)");
    }
  }
  // And the other way round: a component the checkpoint's run had and this recipe drops
  // (a scheduler removed would leave the learning rate where the schedule had it).
  for (const auto& s : saved) {
    const std::string kind = s.value("kind", "");
    if (kind == "dataset") continue;
    const bool kept = std::any_of(c_.records.begin(), c_.records.end(), [&](const auto& r) { return r.kind == kind; });
    if (!kept && !c_.records.empty()) {
      throw Error(ErrorKind::recipe,
                  "checkpoint was written by a run with " + kind + " '" + s.value("name", "") +
                      "', this recipe has no " + kind,
                  SourceLocation{file.string()}, "trainer.resume",
                  "resume with the recipe that wrote it (its run directory has recipe.yaml)");
    }
  }
  std::string saved_data_order;  // empty in checkpoints of mixt before it was saved
  try {
    torch::serialize::InputArchive model_archive, optimizer_archive, precision_archive, trainer_archive;
    contents.archive.read("model", model_archive);
    // Module::load would give a parameter the saved tensor whatever its shape (set_): a
    // model changed since (other channels, other classes) would silently become the saved one.
    const LoadReport fit = compare_state_dict(*c_.model, flatten_archive(model_archive));
    if (!fit.complete()) {
      throw Error(ErrorKind::recipe, "checkpoint does not fit this recipe's model" + fit.describe(),
                  SourceLocation{file.string()}, "trainer.resume",
                  "resume with the recipe that wrote it (its run directory has recipe.yaml); to start another model "
                  "from these weights, mixt export them and name the file in model.weights (strict: false loads "
                  "what matches)");
    }
    c_.model->load(model_archive);
    contents.archive.read("optimizer", optimizer_archive);
    c_.optimizer->load(optimizer_archive);
    contents.archive.read("precision", precision_archive);
    try {
      c_.precision->load(precision_archive);
    } catch (const Error& e) {  // e.g. a disabled GradScaler's (empty) state, resumed enabled
      throw Error(ErrorKind::recipe, "the checkpoint's precision state does not fit this recipe: " + e.message(),
                  SourceLocation{file.string()}, "trainer.resume",
                  "resume with the precision options of the recipe that wrote it (its run directory has "
                  "recipe.yaml)");
    }
    if (c_.scheduler) {
      torch::serialize::InputArchive scheduler_archive;
      if (contents.archive.try_read("scheduler", scheduler_archive)) c_.scheduler->load(scheduler_archive);
    }
    contents.archive.read("trainer", trainer_archive);
    c10::IValue value;
    trainer_archive.read("epoch", value);
    epoch_ = value.toInt();
    trainer_archive.read("batches_in_epoch", value);
    batches_in_epoch_ = value.toInt();
    trainer_archive.read("global_step", value);
    global_step_ = value.toInt();
    if (trainer_archive.try_read("skipped_steps", value)) skipped_steps_ = value.toInt();
    resume_data_positions_.clear();
    if (trainer_archive.try_read("data_positions", value)) resume_data_positions_ = value.toIntVector();
    if (trainer_archive.try_read("data_order", value)) saved_data_order = value.toStringRef();
    at::Tensor rng;
    trainer_archive.read("cpu_rng_state", rng);
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(rng);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw Error(ErrorKind::recipe, std::string("checkpoint does not fit this recipe: ") + e.what_without_backtrace(),
                SourceLocation{file.string()}, "trainer.resume");
  }
  // A checkpoint from further into an epoch than this data has batches (other data, another
  // batch size) would silently train on nothing, or fail deep in the loader.
  std::int64_t furthest = batches_in_epoch_;
  for (const std::int64_t position : resume_data_positions_) furthest = std::max(furthest, position);
  const std::int64_t batches = c_.train->batches_per_epoch();
  if (furthest > batches) {
    throw Error(ErrorKind::recipe,
                "checkpoint stopped after batch " + std::to_string(furthest) + " of epoch " +
                    std::to_string(epoch_ + 1) + ", but the training data has " + std::to_string(batches) +
                    " batches per epoch",
                SourceLocation{file.string()}, "trainer.resume",
                "resume with the data and batch size the run was started with (its run directory has recipe.yaml)");
  }
  // Mid-epoch, the position counts batches of the order the run had: with another batch
  // size, seed, accumulation, world size or dataset the same count is other samples, and
  // the rest of the epoch would skip some and train others twice, silently.
  if (check_data_order && batches_in_epoch_ > 0 && !saved_data_order.empty() && saved_data_order != data_order()) {
    throw Error(ErrorKind::recipe,
                "checkpoint stopped in the middle of epoch " + std::to_string(epoch_ + 1) + " (after batch " +
                    std::to_string(batches_in_epoch_) + ") with data.train " + saved_data_order +
                    "; this run has " + data_order() + ": the rest of the epoch would not be the samples it left",
                SourceLocation{file.string()}, "trainer.resume",
                "resume mid-epoch with the data.train, trainer.seed, trainer.accumulate and number of ranks the run "
                "was interrupted with (its run directory has recipe.yaml), or resume from the epoch's start: the "
                "checkpoint before it (checkpoints/epoch-NNNN, or none: start again)");
  }
  resumed_from_ = file;
  progress_.note("resumed from " + file.string() + " at epoch " + std::to_string(epoch_ + 1) + ", step " +
                 std::to_string(global_step_));
  // trainer.epochs is the total, not how many more: a lower one would end the run at once.
  if (epoch_ >= options_.epochs) {
    progress_.note("mixt: warning: the checkpoint has finished " + std::to_string(epoch_) +
                   " epochs and trainer.epochs (the total, not how many more) is " + std::to_string(options_.epochs) +
                   ": nothing left to train; to go on, raise trainer.epochs above " + std::to_string(epoch_));
  }
}

}  // namespace mixt
