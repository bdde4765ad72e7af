// A test-only helper: one rank of a Gloo process group on loopback, configured from the
// same environment torchrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Launched
// once per rank by tests/distributed/distributed_test.cpp.
//
//   distributed_probe collectives   all-reduce (sum/max/avg), broadcast, barrier and the
//                                   bucketed gradient average, each checked exactly
//   distributed_probe die           rank 1 dies at once; rank 0 reports its all-reduce's
//                                   error and how long it took
//   distributed_probe train R DIR   trains recipe R as `mixt run` does (its process group
//                                   from the recipe), then writes this rank's precision
//                                   state and parameters to DIR/rank<r>.pt: what no
//                                   checkpoint shows, since only rank 0 writes one
//
// Prints "PROBE OK" and exits 0 when every check passes; "MISMATCH: ..." and exit 3 if not.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "distributed/data_parallel.h"
#include "experiment/session.h"
#include "mixt/error.h"
#include "train/progress.h"
#include "train/trainer.h"

using mixt::ReduceOp;
using mixt::distributed::DataParallel;

namespace {

int failures = 0;

void expect_equal(const std::string& what, const at::Tensor& got, const at::Tensor& expected) {
  if (!at::equal(got, expected)) {
    std::printf("MISMATCH: %s\n got %s\n expected %s\n", what.c_str(), c10::str(got).c_str(),
                c10::str(expected).c_str());
    ++failures;
  } else {
    std::printf("ok: %s\n", what.c_str());
  }
}

int collectives(DataParallel& dp) {
  const auto& c = dp.communicator();
  const int r = c.rank(), w = c.world_size();
  const double triangle = w * (w + 1) / 2.0;  // sum of (rank + 1)

  at::Tensor sum = at::tensor({1.0f, 10.0f, 0.5f}) * static_cast<float>(r + 1);
  c.all_reduce(sum, ReduceOp::sum);
  expect_equal("all_reduce sum float32", sum, at::tensor({1.0f, 10.0f, 0.5f}) * static_cast<float>(triangle));

  at::Tensor ints = at::full({4}, static_cast<std::int64_t>(r + 1) << 40, at::kLong);
  c.all_reduce(ints, ReduceOp::sum);
  expect_equal("all_reduce sum int64", ints, at::full({4}, static_cast<std::int64_t>(triangle) << 40, at::kLong));

  at::Tensor max = at::tensor({static_cast<double>(r), -static_cast<double>(r), r == 0 ? INFINITY : 0.0});
  c.all_reduce(max, ReduceOp::max);
  expect_equal("all_reduce max float64 (inf wins)", max, at::tensor({static_cast<double>(w - 1), 0.0, INFINITY}));

  at::Tensor avg = at::arange(6, at::kFloat).reshape({2, 3}) * static_cast<float>(2 * r);
  c.all_reduce(avg, ReduceOp::avg);
  expect_equal("all_reduce avg", avg, at::arange(6, at::kFloat).reshape({2, 3}) * static_cast<float>(w - 1));

  at::Tensor strided = (at::arange(6, at::kFloat).reshape({2, 3}) + r).t();  // not contiguous
  c.all_reduce(strided, ReduceOp::sum);
  expect_equal("all_reduce of a non-contiguous tensor", strided,
               (at::arange(6, at::kFloat).reshape({2, 3}) * w + (w * (w - 1) / 2)).t());

  for (int root : {0, w - 1}) {
    at::Tensor b = at::arange(5, at::kFloat) + 100.0f * static_cast<float>(r);
    c.broadcast(b, root);
    expect_equal("broadcast from rank " + std::to_string(root), b,
                 at::arange(5, at::kFloat) + 100.0f * static_cast<float>(root));
  }
  c.barrier();
  std::printf("ok: barrier\n");

  // Gradient average over buckets of 64 bytes: several buckets, one parameter larger than
  // a bucket, two dtypes.
  std::vector<at::Tensor> params;
  for (std::int64_t n : {3, 40, 5, 7}) params.push_back(at::zeros({n}, at::kFloat).requires_grad_(true));
  params.push_back(at::zeros({6}, at::kDouble).requires_grad_(true));
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].mutable_grad() = (at::arange(params[i].numel(), params[i].options()) + static_cast<double>(i)) *
                               static_cast<double>(2 * (r + 1));
  }
  mixt::distributed::GradientBuckets buckets(params, 64);
  std::printf("buckets: %zu\n", buckets.bucket_count());
  if (buckets.bucket_count() < 3) {
    std::printf("MISMATCH: expected several buckets\n");
    ++failures;
  }
  buckets.average(c);
  for (std::size_t i = 0; i < params.size(); ++i) {
    // mean over ranks of 2 (r + 1) = w + 1
    expect_equal("gradient average, parameter " + std::to_string(i), params[i].grad(),
                 (at::arange(params[i].numel(), params[i].options()) + static_cast<double>(i)) *
                     static_cast<double>(w + 1));
  }
  // The same with overlap: a real backward whose gradient hooks start every bucket's
  // all-reduce before backward returns; the result must be the same, exactly.
  {
    std::vector<at::Tensor> leaves;
    for (std::int64_t n : {3, 40, 5, 7}) leaves.push_back(at::zeros({n}, at::kFloat).requires_grad_(true));
    mixt::distributed::GradientBuckets overlapped(leaves, 64);
    overlapped.enable_overlap(c);
    for (int round = 0; round < 2; ++round) {  // twice: the state resets between steps
      for (auto& leaf : leaves) leaf.mutable_grad() = at::Tensor();
      overlapped.prepare_backward(/*last=*/true);
      at::Tensor loss = at::zeros({}, at::kFloat);
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        const at::Tensor weights = (at::arange(leaves[i].numel(), at::kFloat) + static_cast<float>(i)) *
                                   static_cast<float>(2 * (r + 1));
        loss = loss + (leaves[i] * weights).sum();
      }
      loss.backward();
      const std::size_t started = overlapped.started_during_backward();
      overlapped.average(c);
      if (started != overlapped.bucket_count()) {
        std::printf("MISMATCH: %zu of %zu buckets started during backward\n", started, overlapped.bucket_count());
        ++failures;
      }
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        expect_equal("overlapped gradient average, round " + std::to_string(round) + ", parameter " + std::to_string(i),
                     leaves[i].grad(),
                     (at::arange(leaves[i].numel(), at::kFloat) + static_cast<float>(i)) * static_cast<float>(w + 1));
      }
    }
  }
  if (failures) return 3;
  std::printf("PROBE OK rank %d of %d\n", r, w);
  return 0;
}

int die(DataParallel& dp) {
  if (dp.rank() == 1) {
    std::printf("rank 1: dying\n");
    std::fflush(stdout);
    std::_Exit(9);
  }
  const auto start = std::chrono::steady_clock::now();
  at::Tensor t = at::ones({1024});
  try {
    for (int i = 0; i < 1000; ++i) dp.communicator().all_reduce(t, ReduceOp::sum);
  } catch (const mixt::Error& error) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("caught after %.1fs: %s\n", seconds, error.what());
    std::fflush(stdout);
    std::_Exit(0);  // the process group of a failed run is not worth a clean shutdown
  }
  std::printf("MISMATCH: all_reduce succeeded with a dead peer\n");
  return 3;
}

int train(const std::string& recipe, const std::string& out) {
  mixt::Session session;
  mixt::Experiment e = session.prepare(recipe, {});
  if (!e.parallel) {
    std::printf("no process group\n");
    return 2;
  }
  mixt::Progress quiet(false, 1000, /*quiet=*/true);
  mixt::Trainer(e.components, e.facts, e.options, nullptr, quiet, e.parallel.get()).fit();
  torch::serialize::OutputArchive archive;
  e.components.precision->save(archive);  // a float8 policy's fp8_amax_history, fp8_scales
  // The optimizer's parameters (a master-weight policy's float32 masters) and the model's, flat.
  const auto flat = [](const std::vector<at::Tensor>& tensors) {
    std::vector<at::Tensor> flattened;
    for (const at::Tensor& t : tensors) flattened.push_back(t.detach().flatten().to(at::kFloat));
    return at::cat(flattened);
  };
  archive.write("optimizer_parameters", flat(e.components.optimizer->parameters()));
  archive.write("model_parameters", flat(e.components.model->parameters()));
  const std::string file = out + "/rank" + std::to_string(e.parallel->rank()) + ".pt";
  archive.save_to(file);
  std::printf("PROBE OK rank %d of %d: %s\n", e.parallel->rank(), e.parallel->world_size(), file.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "train" && argc == 4) return train(argv[2], argv[3]);
    const auto environment = mixt::distributed::LaunchEnvironment::from_process_environment();
    if (!environment) {
      std::printf("no RANK/WORLD_SIZE in the environment\n");
      return 2;
    }
    mixt::distributed::DistributedOptions options;
    options.backend = "gloo";
    options.timeout_seconds = 30;
    DataParallel dp(*environment, options, at::kCPU);
    std::printf("backend %s, rank %d of %d\n", dp.backend_name().c_str(), dp.rank(), dp.world_size());
    if (mode == "collectives") return collectives(dp);
    if (mode == "die") return die(dp);
    std::printf("unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (const std::exception& error) {
    std::printf("error: %s\n", error.what());
    return 1;
  }
}
