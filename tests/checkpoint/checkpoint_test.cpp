// Checkpoints as the trainer writes and resumes them: the newest found by its header, the
// `last` link, files from a GPU run, damaged or foreign files refused as such.
#include "checkpoint/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "blob_training.h"
#include "expect_error.h"
#include "test_support.h"
#include "train/trainer.h"

namespace mixt {
namespace {

using testing::Fixture;
using testing::options;
using testing::same;

// A crash between an epoch's file going into place and `last` (then `interrupted`) being
// updated leaves both behind the newest: resuming the run directory reads the headers.
TEST(Checkpoints, ResumingADirectoryTakesTheNewestByItsHeaderNotTheLink) {
  Fixture f;
  testing::TempDir dir;
  RunDirectory run(dir.path(), "crash");
  Trainer(f.components, f.facts, options(2), &run, f.progress).fit();
  const fs::path checkpoints = run.checkpoints();
  fs::remove(checkpoints / "last");
  fs::create_symlink("epoch-0001", checkpoints / "last");
  fs::copy_file(checkpoints / "epoch-0001", checkpoints / "interrupted");
  EXPECT_EQ(resolve_checkpoint(run.path()), checkpoints / "epoch-0002");
  EXPECT_EQ(resolve_checkpoint(checkpoints), checkpoints / "epoch-0002");
}

// Found by reading while writing the checkpoint fuzz target (confirmed by it;
// fuzz/regressions/checkpoint): a header whose batches_in_epoch is not a number made ranking
// the candidates throw nlohmann's type_error, which no caller catches. Such a header now
// ranks as 0 batches into its epoch, and the newer epoch still wins.
TEST(Checkpoints, AHeaderWhoseBatchesInEpochIsNotANumberStillRanks) {
  testing::TempDir dir;
  const auto checkpoint = [&](const std::string& name, const std::string& header) {
    std::string bytes(kCheckpointMagic, sizeof(kCheckpointMagic));
    const std::uint32_t format = kCheckpointFormat;
    const std::uint64_t size = header.size();
    bytes.append(reinterpret_cast<const char*>(&format), sizeof(format));
    bytes.append(reinterpret_cast<const char*>(&size), sizeof(size));
    dir.write("checkpoints/" + name, bytes + header);
  };
  checkpoint("epoch-0001", R"({"epoch": 1, "batches_in_epoch": 7})");
  checkpoint("epoch-0002", R"({"epoch": 2, "batches_in_epoch": "3"})");
  EXPECT_EQ(resolve_checkpoint(dir.path()), dir.path() / "checkpoints" / "epoch-0002");
}

// `last` that cannot be re-pointed (a directory named last.tmp in the way) is a mixt error
// naming the link, not a raw filesystem error; the epoch's file is complete and found.
TEST(Checkpoints, ALinkThatCannotBeMadeIsAMixtErrorAndTheEpochIsKept) {
  Fixture f;
  testing::TempDir dir;
  RunDirectory run(dir.path(), "link");
  fs::create_directories(run.checkpoints() / "last.tmp" / "in-the-way");
  testing::expect_error([&] { Trainer(f.components, f.facts, options(1), &run, f.progress).fit(); }, ErrorKind::runtime,
                        "cannot point " + (run.checkpoints() / "last").string() + " at epoch-0001");
  EXPECT_EQ(resolve_checkpoint(run.path()), run.checkpoints() / "epoch-0001");
}

// Rewrites a checkpoint written here (on the CPU) as if its tensors had been saved from
// cuda:0: the storage location in the archive's data.pkl is the only difference.
void as_if_saved_on_cuda(const fs::path& file) {
  std::string bytes = testing::read_file(file);
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data() + sizeof(kCheckpointMagic) + sizeof(std::uint32_t), sizeof(header_size));
  const std::size_t zip_start = sizeof(kCheckpointMagic) + sizeof(std::uint32_t) + sizeof(header_size) + header_size;
  std::istringstream zip(bytes.substr(zip_start, bytes.size() - zip_start - 20));  // less format 2's trailer
  caffe2::serialize::PyTorchStreamReader reader(&zip);
  std::string rewritten;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, std::size_t size) {
      rewritten.append(static_cast<const char*>(data), size);
      return size;
    });
    writer.setMinVersion(reader.version());
    for (const std::string& name : reader.getAllRecords()) {
      if (name == "version" || name == ".data/version" || name == "byteorder") continue;  // the writer's own
      auto [data, size] = reader.getRecord(name);
      std::string record(static_cast<const char*>(data.get()), size);
      if (name == "data.pkl") {
        // BINUNICODE "cpu" -> "cuda:0" (memoised: written once, referred to after).
        const std::string cpu("X\x03\0\0\0cpu", 8), cuda("X\x06\0\0\0cuda:0", 11);
        const auto at = record.find(cpu);
        ASSERT_NE(at, std::string::npos);
        record.replace(at, cpu.size(), cuda);
      }
      writer.writeRecord(name, record.data(), record.size());
    }
    writer.writeEndOfFile();
  }
  // Written as format 1 (no trailer), which mixt before format 2 wrote and still reads.
  const std::uint32_t format_1 = 1;
  bytes.replace(sizeof(kCheckpointMagic), sizeof(format_1), reinterpret_cast<const char*>(&format_1),
                sizeof(format_1));
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, zip_start) << rewritten;
}

// A checkpoint from a GPU run is read on a machine without one (mixt export on a laptop),
// by a CPU run, or by another rank's GPU: its tensors land on the reader's device, and the
// model's parameters stay where the model is (Module::load would move them to the file's).
// One epoch of the fixture saved to `file`; returns the weights it saved.
std::vector<at::Tensor> train_one_epoch_and_save(const fs::path& file) {
  Fixture saved;
  Trainer trained(saved.components, saved.facts, options(1), nullptr, saved.progress);
  trained.fit();
  trained.save_checkpoint(file);
  return saved.weights();
}

TEST(Checkpoints, ACheckpointSavedOnAGpuResumesOnTheCpu) {
  testing::TempDir dir;
  const std::vector<at::Tensor> saved = train_one_epoch_and_save(dir.path() / "ckpt");
  as_if_saved_on_cuda(dir.path() / "ckpt");

  CheckpointContents contents = read_checkpoint(dir.path() / "ckpt");  // as mixt export reads it
  torch::serialize::InputArchive model;
  contents.archive.read("model", model);
  for (const auto& [name, tensor] : flatten_archive(model)) EXPECT_TRUE(tensor.device().is_cpu()) << name;
  Fixture resumed;
  Trainer(resumed.components, resumed.facts, options(2), nullptr, resumed.progress).resume(dir.path() / "ckpt");
  EXPECT_TRUE(same(resumed.weights(), saved));
  for (const auto& p : resumed.components.model->parameters()) EXPECT_TRUE(p.device().is_cpu());
}

std::string resume_error(const fs::path& checkpoint) {
  Fixture f;
  try {
    Trainer(f.components, f.facts, options(2), nullptr, f.progress).resume(checkpoint);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.message();
  }
  return "(resumed)";
}

// LibTorch reads the zip inside a checkpoint without checking its CRCs: a flipped bit in a
// tensor loaded silently. The trailer of format 2 (size, CRC-32, end marker) catches it, and
// tells a file cut short from one that is not a checkpoint; a header that is JSON but not
// mixt's object was a raw json exception with exit 1.
TEST(Checkpoints, ADamagedOrTruncatedCheckpointIsRefusedAsSuch) {
  testing::TempDir dir;
  train_one_epoch_and_save(dir.path() / "good");
  const std::string bytes = testing::read_file(dir.path() / "good");
  EXPECT_EQ(resume_error(dir.path() / "good"), "(resumed)");

  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x01);
  std::ofstream(dir.path() / "flipped", std::ios::binary) << flipped;
  EXPECT_EQ(resume_error(dir.path() / "flipped"), "damaged checkpoint (its bytes do not match the CRC-32 written with "
                                                  "them)");
  std::ofstream(dir.path() / "short", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  EXPECT_EQ(resume_error(dir.path() / "short"), "damaged checkpoint (cut short: it does not end with its end marker)");
  std::ofstream(dir.path() / "twelve", std::ios::binary) << bytes.substr(0, 12);
  EXPECT_EQ(resume_error(dir.path() / "twelve"), "damaged checkpoint (cut short in its header)");

  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data() + 12, sizeof(header_size));
  std::string array_header = bytes.substr(0, 12);
  const std::uint64_t two = 2;
  array_header.append(reinterpret_cast<const char*>(&two), sizeof(two));
  array_header += "[]" + bytes.substr(20 + header_size);
  std::ofstream(dir.path() / "array", std::ios::binary) << array_header;
  EXPECT_EQ(resume_error(dir.path() / "array"), "damaged checkpoint (its header is not the JSON object mixt writes)");
}

// Format 1 (what mixt wrote before the trailer) has no CRC of its own, but each entry of its
// zip carries one, which LibTorch does not check: a flipped bit in a tensor loaded silently,
// and one in a size made LibTorch allocate gigabytes (fuzzing). They are checked first.
TEST(Checkpoints, AFormatOneCheckpointIsCheckedAgainstItsZipEntriesCrcs) {
  testing::TempDir dir;
  train_one_epoch_and_save(dir.path() / "good");
  std::string bytes = testing::read_file(dir.path() / "good");
  const std::uint32_t format_1 = 1;
  bytes.replace(sizeof(kCheckpointMagic), sizeof(format_1), reinterpret_cast<const char*>(&format_1), sizeof(format_1));
  bytes.resize(bytes.size() - 20);  // format 2's trailer: size, CRC-32, end marker
  std::ofstream(dir.path() / "format1", std::ios::binary) << bytes;
  EXPECT_EQ(resume_error(dir.path() / "format1"), "(resumed)");

  // A bit flipped in the pickle and in a tensor's bytes, where LibTorch's reader finds them.
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data() + sizeof(kCheckpointMagic) + sizeof(std::uint32_t), sizeof(header_size));
  const std::size_t zip_start = sizeof(kCheckpointMagic) + sizeof(std::uint32_t) + sizeof(header_size) + header_size;
  std::istringstream zip(bytes.substr(zip_start));
  caffe2::serialize::PyTorchStreamReader reader(&zip);
  for (const std::string record : {"data.pkl", "data/0"}) {
    std::string flipped = bytes;
    const std::size_t at = zip_start + reader.getRecordOffset(record) + 3;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x01);
    std::ofstream(dir.path() / "flipped", std::ios::binary | std::ios::trunc) << flipped;
    EXPECT_EQ(resume_error(dir.path() / "flipped"),
              "damaged checkpoint (entry archive/" + record + "'s bytes do not match its CRC-32)");
  }
  std::ofstream(dir.path() / "short", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  EXPECT_EQ(resume_error(dir.path() / "short"), "damaged checkpoint (it has no end of central directory)");
}

// A run directory copied without its `last` link (or with `last` pointing at a removed
// file) still has its epoch checkpoints: "no checkpoint found" sent users looking.
TEST(Checkpoints, ARunDirectoryWithoutItsLastLinkResumesFromItsNewestEpoch) {
  testing::TempDir dir;
  Fixture first;
  RunDirectory run(dir.path(), "run");
  Trainer(first.components, first.facts, options(2), &run, first.progress).fit();
  fs::remove(run.checkpoints() / "last");
  EXPECT_EQ(resolve_checkpoint(run.path()), run.checkpoints() / "epoch-0002");
  fs::create_symlink("epoch-0009", run.checkpoints() / "last");  // dangling
  EXPECT_EQ(resolve_checkpoint(run.path()), run.checkpoints() / "epoch-0002");
  EXPECT_TRUE(has_checkpoint(run.path()));
}

TEST(Checkpoints, CheckpointFromAnotherFileIsRejected) {
  testing::TempDir dir;
  Fixture f;
  Trainer trainer(f.components, f.facts, options(1), nullptr, f.progress);
  const auto bogus = dir.write("bogus.ckpt", "definitely not a checkpoint");
  testing::expect_error([&] { trainer.resume(bogus); }, ErrorKind::recipe, "not a mixt checkpoint");
}

}  // namespace
}  // namespace mixt
