// safetensors I/O and state dicts: exact round trips, the byte layout of the format,
// PyTorch's state_dict naming and order, and strict / non-strict loading; weights and
// checkpoint files written whole or not at all.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "checkpoint/checkpoint.h"
#include "mixt/error.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "expect_error.h"
#include "test_support.h"

namespace mixt {
namespace {

TEST(Safetensors, RoundTripsEveryDtypeExactly) {
  TempDir dir;
  at::manual_seed(0);
  NamedTensors tensors = {
      {"f32", at::randn({3, 4})},
      {"f64", at::randn({2}, at::kDouble)},
      {"f16", at::randn({5}).to(at::kHalf)},
      {"bf16", at::randn({2, 2}).to(at::kBFloat16)},
      {"i64", at::arange(7)},
      {"i32", at::arange(3, at::kInt)},
      {"u8", at::arange(4, at::kByte)},
      {"bool", at::arange(4).remainder(2) == 0},
      {"scalar", at::tensor(3.5f)},
      {"empty", at::empty({0, 3})},
      {"strided", at::randn({4, 6}).t()},  // not contiguous: written as its values
  };
  const auto file = dir.path() / "t.safetensors";
  save_safetensors(file, tensors, {{"format", "pt"}});
  const SafetensorsContents read = load_safetensors(file);
  ASSERT_EQ(read.tensors.size(), tensors.size());
  EXPECT_EQ(read.metadata.at("format"), "pt");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(read.tensors[i].first, tensors[i].first);
    EXPECT_EQ(read.tensors[i].second.scalar_type(), tensors[i].second.scalar_type()) << tensors[i].first;
    EXPECT_EQ(read.tensors[i].second.sizes(), tensors[i].second.sizes()) << tensors[i].first;
    EXPECT_TRUE(at::equal(read.tensors[i].second, tensors[i].second)) << tensors[i].first;
  }
}

TEST(Safetensors, ByteLayoutIsTheFormat) {
  // Little-endian u64 header length, JSON header padded to 8 bytes, then raw data.
  TempDir dir;
  const auto file = dir.path() / "t.safetensors";
  save_safetensors(file, {{"w", at::tensor({1.0f, 2.0f})}});
  const std::string bytes = testing::read_file(file);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  ASSERT_EQ(n % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["w"]["shape"], nlohmann::json::array({2}));
  EXPECT_EQ(header["w"]["data_offsets"], nlohmann::json::array({0, 8}));
  ASSERT_EQ(bytes.size(), 8 + n + 8);
  float values[2];
  std::memcpy(values, bytes.data() + 8 + n, 8);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], 2.0f);
}

TEST(Safetensors, DamagedFilesAreClearErrors) {
  TempDir dir;
  const auto good = dir.path() / "good.safetensors";
  save_safetensors(good, {{"w", at::ones({16})}});
  const std::string bytes = testing::read_file(good);
  const auto expect_error = [&](const std::string& content, const std::string& what) {
    const auto file = dir.write("bad.safetensors", content);
    try {
      load_safetensors(file);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::recipe);
      EXPECT_THAT(e.what(), HasSubstr("not a valid safetensors file"));
      EXPECT_THAT(e.what(), HasSubstr("bad.safetensors"));
    }
  };
  expect_error("", "empty file");
  expect_error("hello world, not a tensor file", "text");
  expect_error(bytes.substr(0, bytes.size() - 4), "truncated data");
  std::string not_json = bytes;
  not_json[8] = '!';
  expect_error(not_json, "header not JSON");
  // [16] -> [-6]: LibTorch's "negative dimension" came out raw, exit 1, no file named.
  std::string negative = bytes;
  const auto shape_at = negative.find("[16]");
  ASSERT_NE(shape_at, std::string::npos);
  negative.replace(shape_at, 4, "[-6]");
  expect_error(negative, "a negative dimension");
  // Headers written by hand (found by fuzz/safetensors_fuzz.cpp): a float where a count goes
  // was converted to int64 (undefined beyond its range); a shape of 10^12 floats was
  // allocated before the offsets were checked against the file.
  const auto with_header = [](const std::string& header, std::size_t data_bytes) {
    std::string file(8, '\0');
    const std::uint64_t length = header.size();
    std::memcpy(file.data(), &length, 8);
    return file + header + std::string(data_bytes, '\0');
  };
  const auto message_of = [&](const std::string& content) -> std::string {
    try {
      load_safetensors(dir.write("bad.safetensors", content));
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  };
  EXPECT_THAT(message_of(with_header(R"({"w":{"dtype":"F32","shape":[6.6e26],"data_offsets":[0,64]}})", 64)),
              HasSubstr("tensor 'w' has 6.6e+26 in its dimension in its shape, not a whole number"));
  EXPECT_THAT(message_of(with_header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16.5]}})", 16)),
              HasSubstr("not a whole number"));
  EXPECT_THAT(message_of(with_header(R"({"w":{"dtype":"F32","shape":[1000000000000],)"
                                     R"("data_offsets":[0,4000000000000]}})",
                                     16)),
              HasSubstr("data_offsets do not match its shape and dtype, or the file is truncated"));
  EXPECT_THAT(message_of(with_header(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],)"
                                     R"("data_offsets":[0,0]}})",
                                     0)),
              HasSubstr("data_offsets do not match"));
  EXPECT_EQ(message_of(with_header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16)), "(loaded)");
  try {
    load_safetensors(dir.path() / "missing.safetensors");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing.safetensors: cannot read safetensors file: No such file or directory"))
        << e.what();
  }
}

// A module with torchvision-like nesting: own parameters, a child, a Sequential.
struct Net : torch::nn::Module {
  Net() {
    conv = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)));
    bn = register_module("bn1", torch::nn::BatchNorm2d(4));
    head = register_module("layer", torch::nn::Sequential(torch::nn::Linear(4, 2)));
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Sequential head{nullptr};
};

TEST(StateDict, NamesAndOrderAreTorchs) {
  Net net;
  std::vector<std::string> names;
  for (const auto& item : state_dict(net)) names.push_back(item.first);
  // What torch.nn.Module.state_dict() lists for the same module tree.
  const std::vector<std::string> expected = {"conv1.weight",       "bn1.weight",          "bn1.bias",
                                             "bn1.running_mean",   "bn1.running_var",     "bn1.num_batches_tracked",
                                             "layer.0.weight",     "layer.0.bias"};
  EXPECT_EQ(names, expected);
}

TEST(StateDict, StrictLoadListsEveryProblemAndLoadsNothing) {
  Net source, target;
  NamedTensors tensors = state_dict(source);
  tensors.erase(tensors.begin());                                  // conv1.weight missing
  tensors.emplace_back("extra.weight", at::zeros({1}));            // unexpected
  for (auto& [name, t] : tensors) {
    if (name == "layer.0.weight") t = at::zeros({3, 4});           // wrong shape
  }
  const at::Tensor before = target.bn->weight.clone();
  SCOPED_TRACE(::testing::Message() << "strict load accepted mismatching weights");
  const Error e = testing::thrown_error([&] {
    load_state_dict(target, tensors, /*strict=*/true, "w.safetensors");
  });
  const std::string text = e.what();
  EXPECT_THAT(text, HasSubstr("missing in the file (1): conv1.weight"));
  EXPECT_THAT(text, HasSubstr("unexpected in the file (1): extra.weight"));
  EXPECT_THAT(text, HasSubstr("layer.0.weight: file [3, 4] vs model [2, 4]"));
  EXPECT_THAT(text, HasSubstr("w.safetensors"));
  EXPECT_TRUE(at::equal(before, target.bn->weight));
}

// torch.nn.BatchNorm's _load_from_state_dict fills in a missing num_batches_tracked (a
// state dict without version metadata: from safetensors, or older PyTorch) even under
// strict=True; mixt refused such files. The buffer keeps its value, as in PyTorch.
TEST(StateDict, AStrictLoadTakesAStateDictWithoutNumBatchesTrackedAsPyTorchDoes) {
  Net source, target;
  at::NoGradGuard no_grad;
  source.bn->running_mean.fill_(0.5);
  target.bn->num_batches_tracked.fill_(7);
  NamedTensors tensors;
  for (auto& item : state_dict(source)) {
    if (item.first != "bn1.num_batches_tracked") tensors.push_back(item);
  }
  const LoadReport report = load_state_dict(target, tensors, /*strict=*/true, "w.safetensors");
  EXPECT_TRUE(report.complete());
  EXPECT_TRUE(at::equal(target.bn->running_mean, source.bn->running_mean));
  EXPECT_EQ(target.bn->num_batches_tracked.item<std::int64_t>(), 7);
}

TEST(StateDict, NonStrictLoadsWhatMatches) {
  Net source, target;
  at::NoGradGuard no_grad;
  source.bn->weight.fill_(3.0);
  NamedTensors tensors = state_dict(source);
  tensors.erase(tensors.begin());
  const LoadReport report = load_state_dict(target, tensors, /*strict=*/false, "w");
  EXPECT_EQ(report.loaded, 7u);
  EXPECT_EQ(report.missing, std::vector<std::string>{"conv1.weight"});
  EXPECT_TRUE(at::equal(target.bn->weight, source.bn->weight));
  EXPECT_FALSE(at::equal(target.conv->weight, source.conv->weight));
}

TEST(AtomicWrite, ReplacesTheFileWholeAndLeavesNoTemporary) {
  TempDir dir;
  const auto file = dir.write("w.bin", "old");
  write_file_atomically(file, [](std::ostream& out) { out << "new"; });
  EXPECT_EQ(testing::read_file(file), "new");
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
}

// A file system out of inodes says ENOSPC like a full one: the error says which it is.
// Root only (it mounts a tmpfs of a few inodes).
TEST(AtomicWrite, NoFreeInodesIsNamedAsSuch) {
  TempDir dir;
  const fs::path disk = dir.path() / "disk";
  const testing::MountedTmpfs tmpfs(disk, "size=1m,nr_inodes=16");
  if (!tmpfs.mounted()) GTEST_SKIP() << "mounting a small tmpfs needs root";
  for (int i = 0; std::ofstream(disk / ("f" + std::to_string(i))) && i < 100; ++i) {
  }
  try {
    write_file_atomically(disk / "epoch-0001", [](std::ostream& out) { out << "weights"; });
    ADD_FAILURE() << "the write succeeded without a free inode";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::runtime);
    EXPECT_THAT(e.hint(), HasSubstr("no free inodes")) << e.what() << " / " << e.hint();
  }
}

TEST(AtomicWrite, StaleTemporariesAreRemovedAndNothingElse) {
  TempDir dir;
  dir.write("epoch-0002.tmp", "half");
  dir.write("epoch-0001", "whole");
  fs::create_symlink("epoch-0001", dir.path() / "last.tmp");
  fs::create_directories(dir.path() / "kept.tmp");
  remove_stale_temporaries(dir.path());
  EXPECT_FALSE(fs::exists(dir.path() / "epoch-0002.tmp"));
  EXPECT_FALSE(fs::is_symlink(dir.path() / "last.tmp"));
  EXPECT_TRUE(fs::exists(dir.path() / "epoch-0001"));
  EXPECT_TRUE(fs::is_directory(dir.path() / "kept.tmp"));  // not a write's leftover
}

TEST(AtomicWrite, AWriterThatFailsLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  const auto file = dir.write("w.bin", "old");
  EXPECT_THROW(write_file_atomically(file,
                                     [](std::ostream& out) {
                                       out << "half";
                                       throw runtime_error("serializer failed");
                                     }),
               Error);
  EXPECT_EQ(testing::read_file(file), "old");
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
}

// A write that cannot grow the file, made with RLIMIT_FSIZE in a child process (writes past
// it fail with EFBIG, as on a full disk with ENOSPC): exported weights and checkpoints keep
// their previous contents, the temporary file is gone, and the error says what happened.
TEST(AtomicWrite, AFullDiskLeavesTheOldFilesAndNoTemporaries) {
  TempDir dir;
  const auto weights = dir.write("model.safetensors", "previous export");
  const auto checkpoint = dir.write("last", "previous checkpoint");
  const NamedTensors tensors = {{"w", at::ones({1 << 18})}};  // 1 MiB
  torch::serialize::OutputArchive archive;
  archive.write("w", tensors.front().second);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int failures = 0;
    const auto disk_full = [&](const std::function<void()>& write) {
      try {
        write();
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::runtime &&
            e.hint() == "the file would exceed the largest one allowed here (ulimit -f, or the file system's limit)") {
          ++failures;
        }
      } catch (...) {
      }
    };
    disk_full([&] { save_safetensors(weights, tensors); });
    disk_full([&] { write_checkpoint(checkpoint, nlohmann::json::object(), archive); });
    ::_exit(failures);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 2) << "writes that reported the full disk as such";
  EXPECT_EQ(testing::read_file(weights), "previous export");
  EXPECT_EQ(testing::read_file(checkpoint), "previous checkpoint");
  EXPECT_FALSE(fs::exists(weights.string() + ".tmp"));
  EXPECT_FALSE(fs::exists(checkpoint.string() + ".tmp"));
}

}  // namespace
}  // namespace mixt
