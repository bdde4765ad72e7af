// OptimizerStateResharder: optimizer state written by N ranks of a sharded run, as M ranks
// (or one whole optimizer) read it. The expected chunks are cut here by hand from the whole
// state, as the layout is documented (FSDP2's Shard(0): ceil(rows / world) rows a rank, the
// last padded with zeros), not by the code under test.
#include "distributed/optimizer_resharding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/serialize/output-archive.h>

#include <sstream>

namespace mixt::distributed {
namespace {

using ::testing::HasSubstr;

// Rank `rank`'s chunk of `whole` over `world` ranks (world 1: whole itself).
at::Tensor cut(const at::Tensor& whole, int world, int rank) {
  if (world == 1) return whole.clone();
  const std::int64_t rows = whole.size(0);
  const std::int64_t chunk = (rows + world - 1) / world;
  std::vector<std::int64_t> sizes = whole.sizes().vec();
  sizes[0] = chunk;
  at::Tensor out = at::zeros(sizes, whole.options());
  for (std::int64_t row = rank * chunk; row < std::min(rows, (rank + 1) * chunk); ++row) {
    out[row - rank * chunk].copy_(whole[row]);
  }
  return out;
}

torch::serialize::InputArchive reopened(torch::serialize::OutputArchive& archive) {
  std::stringstream bytes;
  archive.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  return in;
}

// An AdamW-like state of three parameters: a matrix of 5 rows (uneven over 2 and 3 ranks), a
// vector of 4 and a matrix of one row (empty chunks on most ranks).
struct WholeState {
  std::vector<OptimizedTensor> order{
      {"a.weight", {5, 3}, at::kFloat}, {"a.bias", {4}, at::kFloat}, {"b.weight", {1, 2}, at::kFloat}};
  std::vector<at::Tensor> exp_avg, exp_avg_sq;
  WholeState() {
    float start = 1;
    for (const auto& tensor : order) {
      const std::int64_t numel = at::ones(tensor.sizes).numel();
      exp_avg.push_back(at::arange(start, start + numel).to(at::kFloat).reshape(tensor.sizes));
      exp_avg_sq.push_back(at::arange(start, start + numel).to(at::kFloat).reshape(tensor.sizes).mul(-0.5));
      start += 100;
    }
  }
  // What rank `rank` of `world` would have written (its chunks, the shared entries).
  torch::serialize::InputArchive written_by(int world, int rank) const {
    torch::serialize::OutputArchive archive;
    archive.write("format", at::tensor(std::int64_t{2}), true);
    archive.write("lr/0", at::tensor(0.001), true);
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::string prefix = "state/" + std::to_string(i) + "/";
      archive.write(prefix + "step", at::scalar_tensor(7.0F), true);
      archive.write(prefix + "exp_avg", cut(exp_avg[i], world, rank), true);
      archive.write(prefix + "exp_avg_sq", cut(exp_avg_sq[i], world, rank), true);
    }
    return reopened(archive);
  }
};

torch::serialize::InputArchive reshard(const WholeState& state, int from_world, int rank, int to_world) {
  OptimizerStateResharder resharder(state.order, from_world, rank, to_world);
  for (int from_rank = 0; from_rank < from_world; ++from_rank) {
    torch::serialize::InputArchive archive = state.written_by(from_world, from_rank);
    resharder.add(from_rank, archive);
  }
  return resharder.result();
}

void expect_rank_state(torch::serialize::InputArchive& got, const WholeState& state, int world, int rank) {
  for (std::size_t i = 0; i < state.order.size(); ++i) {
    const std::string prefix = "state/" + std::to_string(i) + "/";
    at::Tensor exp_avg, exp_avg_sq, step;
    got.read(prefix + "exp_avg", exp_avg, true);
    got.read(prefix + "exp_avg_sq", exp_avg_sq, true);
    got.read(prefix + "step", step, true);
    EXPECT_TRUE(at::equal(exp_avg, cut(state.exp_avg[i], world, rank)))
        << state.order[i].name << " rank " << rank << " of " << world << "\n"
        << exp_avg << "\n"
        << cut(state.exp_avg[i], world, rank);
    EXPECT_TRUE(at::equal(exp_avg_sq, cut(state.exp_avg_sq[i], world, rank))) << state.order[i].name;
    EXPECT_EQ(step.dim(), 0);
    EXPECT_EQ(step.item<float>(), 7.0F);
  }
  at::Tensor format, lr;
  got.read("format", format, true);
  got.read("lr/0", lr, true);
  EXPECT_EQ(format.item<std::int64_t>(), 2);
  EXPECT_EQ(lr.item<double>(), 0.001);
}

TEST(OptimizerResharding, EachNewRankGetsItsChunkOfTheWholeState) {
  const WholeState state;
  for (const auto& [from, to] : std::vector<std::pair<int, int>>{{2, 3}, {3, 2}, {2, 4}, {4, 2}, {2, 2}}) {
    for (int rank = 0; rank < to; ++rank) {
      SCOPED_TRACE(std::to_string(from) + " ranks -> rank " + std::to_string(rank) + " of " + std::to_string(to));
      torch::serialize::InputArchive got = reshard(state, from, rank, to);
      expect_rank_state(got, state, to, rank);
    }
  }
}

TEST(OptimizerResharding, ShardsBecomeTheWholeStateAndTheWholeStateShards) {
  const WholeState state;
  {
    SCOPED_TRACE("3 ranks -> one whole optimizer");
    torch::serialize::InputArchive whole = reshard(state, 3, 0, 1);
    expect_rank_state(whole, state, 1, 0);
    at::Tensor exp_avg;
    whole.read("state/0/exp_avg", exp_avg, true);
    EXPECT_EQ(exp_avg.sizes().vec(), (std::vector<std::int64_t>{5, 3}));  // no padding
  }
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("whole -> rank " + std::to_string(rank) + " of 3");
    torch::serialize::InputArchive got = reshard(state, 1, rank, 3);
    expect_rank_state(got, state, 3, rank);
  }
}

// Per-parameter state that is not element-wise (a norm a row, as Adafactor keeps) differs
// between the ranks: refused, naming it, rather than taken from rank 0.
TEST(OptimizerResharding, RefusesStateThatDiffersBetweenRanksAndIsNotElementWise) {
  const WholeState state;
  OptimizerStateResharder resharder(state.order, 2, 0, 3);
  for (int rank = 0; rank < 2; ++rank) {
    torch::serialize::OutputArchive archive;
    archive.write("state/0/exp_avg", cut(state.exp_avg[0], 2, rank), true);
    archive.write("state/0/row_norm", at::full({7}, static_cast<float>(rank)), true);
    torch::serialize::InputArchive written = reopened(archive);
    if (rank == 0) {
      resharder.add(rank, written);
    } else {
      try {
        resharder.add(rank, written);
        FAIL() << "rank 1's different row_norm was taken";
      } catch (const std::runtime_error& e) {
        EXPECT_THAT(e.what(), HasSubstr("'state/0/row_norm' differs between rank 0's state and rank 1's"));
      }
    }
  }
}

TEST(OptimizerResharding, RefusesAParameterWithNoDimension) {
  try {
    OptimizerStateResharder resharder({{"scale", {}, at::kFloat}}, 2, 0, 1);
    FAIL() << "a 0-dim parameter was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'scale' has no dimension"));
  }
}

TEST(OptimizerResharding, ManifestsNameTheFirstTensorThatDiffers) {
  const std::string text = "sharding gradients\nworld_size 4\n" + describe_tensor("a.weight", {5, 3}, at::kFloat) +
                           "\n" + describe_tensor("a.bias", {4}, at::kFloat) + "\n";
  const ShardManifest manifest = parse_shard_manifest(text);
  EXPECT_EQ(manifest.world_size, 4);
  EXPECT_EQ(manifest.tensors.at("a.weight"), "a.weight [5, 3] Float");
  EXPECT_EQ(first_tensor_difference(manifest, {{"a.bias", {4}, at::kFloat}, {"a.weight", {5, 3}, at::kFloat}}), "");
  EXPECT_EQ(first_tensor_difference(manifest, {{"a.bias", {4}, at::kFloat}, {"a.weight", {6, 3}, at::kFloat}}),
            "the checkpoint's 'a.weight [5, 3] Float', this run's 'a.weight [6, 3] Float'");
  EXPECT_EQ(first_tensor_difference(manifest, {{"a.weight", {5, 3}, at::kFloat}}),
            "the checkpoint's 'a.bias [4] Float', this run has no 'a.bias'");
  EXPECT_EQ(first_tensor_difference(manifest, {{"a.bias", {4}, at::kBFloat16}, {"a.weight", {5, 3}, at::kFloat}}),
            "the checkpoint's 'a.bias [4] Float', this run's 'a.bias [4] BFloat16'");
  EXPECT_THROW(parse_shard_manifest("world_size 4\n"), std::invalid_argument);
  EXPECT_THROW(parse_shard_manifest("sharding gradients\nworld_size none\n"), std::invalid_argument);
}

}  // namespace
}  // namespace mixt::distributed
