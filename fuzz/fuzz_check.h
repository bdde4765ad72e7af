// What a fuzz target asserts: a broken property aborts with its words, which libFuzzer
// reports as a crash and the replay tests (replay_main.cpp) as a failure.
#pragma once

#include <cstdio>
#include <cstdlib>

#define MIXT_FUZZ_CHECK(condition, what)                                                  \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, what); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (false)
