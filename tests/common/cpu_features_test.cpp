// The CPU feature test behind the bfloat16 speed note: /proc/cpuinfo text as Linux writes it.
#include "common/cpu_features.h"

#include <gtest/gtest.h>

namespace mixt {
namespace {

TEST(CpuFeatures, AnAvx2CpuHasNoNativeBfloat16) {
  EXPECT_FALSE(
      cpuinfo_has_native_bfloat16("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n"
                                  "flags\t\t: fpu vme sse sse2 avx avx2 fma bmi2 avx512f avx512bw avx512_vnni\n"));
}

TEST(CpuFeatures, Avx512Bf16OrAmxOrArmBf16IsNative) {
  EXPECT_TRUE(cpuinfo_has_native_bfloat16("flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_fp16\n"));
  EXPECT_TRUE(cpuinfo_has_native_bfloat16("processor\t: 3\nflags\t\t: fpu avx2 amx_bf16 amx_tile amx_int8\n"));
  EXPECT_TRUE(cpuinfo_has_native_bfloat16("Features\t: fp asimd evtstrm aes sve2 bf16 i8mm\n"));
}

TEST(CpuFeatures, OnlyWholeFlagsOnFlagLinesCount) {
  // avx512_bf16x is no flag Linux writes; a model name is no flag list.
  EXPECT_FALSE(cpuinfo_has_native_bfloat16("flags\t\t: avx512_bf16x amx_bf16_lite\nmodel name\t: bf16 avx512_bf16\n"));
}

}  // namespace
}  // namespace mixt
