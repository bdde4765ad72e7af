// What the CPU computes natively, for the speed notes of precision policies: LibTorch runs
// bfloat16 on any CPU, but without the instructions it converts to float32 and back around
// every kernel, several times slower than float32 itself.
#pragma once

#include <string>
#include <string_view>

namespace mixt {

// Whether /proc/cpuinfo text lists an instruction set that computes bfloat16: x86's
// avx512_bf16 or amx_bf16 (its "flags"), Arm's bf16 (its "Features").
bool cpuinfo_has_native_bfloat16(std::string_view cpuinfo);

// This CPU's answer, read once from /proc/cpuinfo (true when it cannot be read: no note
// without evidence). MIXT_CPU_NATIVE_BF16=1 or 0 forces it either way (tests, and a user
// who knows better).
bool cpu_has_native_bfloat16();

// The instructions meant, in a note's words: "avx512_bf16/AMX" on x86, "BF16" on Arm.
std::string native_bfloat16_features();

}  // namespace mixt
