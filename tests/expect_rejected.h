// EXPECT_REJECTED(expr, code, substr): the absl::Status `expr` has status
// code `code` and a message containing `substr`. For tests of code that
// refuses bad input with a clear message (wire frames, index lists,
// authenticated frames).
#ifndef GRADWIRE_TESTS_EXPECT_REJECTED_H_
#define GRADWIRE_TESTS_EXPECT_REJECTED_H_

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#define EXPECT_REJECTED(expr, want_code, substr)                          \
  do {                                                                    \
    const absl::Status _s = (expr);                                       \
    EXPECT_EQ(_s.code(), (want_code)) << _s;                              \
    EXPECT_THAT(std::string(_s.message()), ::testing::HasSubstr(substr)); \
  } while (0)

#endif  // GRADWIRE_TESTS_EXPECT_REJECTED_H_
