// What a test says about a mixt::Error: `thrown_error(action)` is the Error that `action`
// throws, and `expect_error(action, kind, text)` checks its kind and part of its message.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "mixt/error.h"

namespace mixt::testing {

// The mixt::Error `action` throws. A test failure when it throws none: the Error returned
// then says so, so that the checks made on it fail as well. Any other exception propagates.
inline Error thrown_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected a mixt::Error, none was thrown";
  return Error(ErrorKind::runtime, "(no error was thrown)");
}

// `action` throws a mixt::Error of `kind` whose message (what()) contains `text`.
inline void expect_error(const std::function<void()>& action, ErrorKind kind, const std::string& text) {
  const Error error = thrown_error(action);
  EXPECT_EQ(error.kind(), kind) << error.what();
  EXPECT_THAT(error.what(), ::testing::HasSubstr(text));
}

}  // namespace mixt::testing
