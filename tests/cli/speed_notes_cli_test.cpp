// End to end: the start-up note of a policy that computes in a type this CPU emulates, with
// the CPU's bfloat16 support forced either way (MIXT_CPU_NATIVE_BF16), and the same note
// under `mixt bench`'s table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace mixt {
namespace {

const char* kNoBf16 =
    "this CPU has no native bfloat16 (avx512_bf16/AMX): bfloat16 runs several times slower than "
    "float32 here; fp32 is faster on this machine";

CommandResult check_with(const std::string& policy, const std::string& native_bf16) {
  TempDir dir;
  dir.write("r.yaml", testing::kTinyRecipe);
  return run_mixt({"check", "r.yaml", "precision.name=" + policy, "trainer.device=cpu"}, dir.path(),
                  "MIXT_CPU_NATIVE_BF16=" + native_bf16);
}

TEST(SpeedNotes, EveryBfloat16PolicyWarnsOnACpuWithoutNativeBfloat16) {
  for (const std::string policy : {"amp_bf16", "bf16_master", "bf16_true"}) {
    const CommandResult result = check_with(policy, "0");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_THAT(result.output, HasSubstr("mixt: warning: precision " + policy + ": " + kNoBf16)) << policy;
  }
}

TEST(SpeedNotes, NoBfloat16NoteWhereTheCpuHasIt) {
  for (const std::string policy : {"amp_bf16", "bf16_true"}) {
    const CommandResult result = check_with(policy, "1");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_THAT(result.output, Not(HasSubstr("native bfloat16"))) << policy;
    EXPECT_THAT(result.output, Not(HasSubstr("warning"))) << policy;
  }
}

TEST(SpeedNotes, Fp32HasNoNoteEvenWithoutNativeBfloat16) {
  const CommandResult result = check_with("fp32", "0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, Not(HasSubstr("warning")));
}

TEST(SpeedNotes, Float16AdvisesAmpBf16OnlyWhereBfloat16IsNative) {
  const CommandResult without = check_with("amp_fp16", "0");
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_THAT(without.output, HasSubstr("precision amp_fp16: float16 on the CPU is slow"));
  EXPECT_THAT(without.output, Not(HasSubstr("amp_bf16 is the mixed-precision policy")));
  EXPECT_THAT(without.output, HasSubstr("fp32 is the fastest policy on this machine"));

  const CommandResult with = check_with("amp_fp16", "1");
  ASSERT_EQ(with.exit_code, 0) << with.output;
  EXPECT_THAT(with.output, HasSubstr("amp_bf16 is the mixed-precision policy for CPUs"));
}

TEST(SpeedNotes, BenchPrintsTheNoteUnderItsTable) {
  TempDir dir;
  dir.write("r.yaml", testing::kTinyRecipe);
  const CommandResult result = run_mixt(
      {"bench", "r.yaml", "--precision", "fp32,amp_bf16", "--steps", "2", "--warmup", "0", "trainer.device=cpu"},
      dir.path(), "MIXT_CPU_NATIVE_BF16=0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::size_t table = result.output.find("| amp_bf16 |");
  ASSERT_NE(table, std::string::npos) << result.output;
  EXPECT_THAT(result.output.substr(table), HasSubstr("note: precision amp_bf16: " + std::string(kNoBf16)));
}

}  // namespace
}  // namespace mixt
