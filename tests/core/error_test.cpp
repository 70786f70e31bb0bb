// Errors: the message is the user's text alone; the raising source line is kept apart, relative
// to the source tree, and user_message() adds it only when asked (H2_LOG_LEVEL=debug in the tools).
#include "core/error.h"

#include <gtest/gtest.h>

#include <string>

namespace h2 {
namespace {

TEST(Error, MessageHoldsNoSourceLineAndWhereNamesIt) {
  int line = 0;
  try {
    line = __LINE__ + 1;
    H2_THROW(ConfigError, "model.dim = {} is out of range", -3);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "model.dim = -3 is out of range");
    EXPECT_EQ(e.where(), "tests/core/error_test.cpp:" + std::to_string(line));
    EXPECT_EQ(user_message(e, false), "model.dim = -3 is out of range");
    EXPECT_EQ(user_message(e, true),
              "model.dim = -3 is out of range [raised at tests/core/error_test.cpp:" +
                  std::to_string(line) + "]");
    return;
  }
  FAIL() << "H2_THROW did not throw";
}

TEST(Error, ChecksNameTheConditionAndOtherExceptionsPrintAsTheyAre) {
  try {
    H2_CHECK(1 + 1 == 3, "arithmetic is {}", "broken");
    FAIL() << "H2_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "check failed: 1 + 1 == 3: arithmetic is broken");
    EXPECT_NE(e.where().find("tests/core/error_test.cpp:"), std::string::npos);
  }
  const std::runtime_error plain("disk full");
  EXPECT_EQ(user_message(plain, true), "disk full");
  EXPECT_EQ(Error("no line").where(), "");
  EXPECT_EQ(user_message(Error("no line"), true), "no line");
}

}  // namespace
}  // namespace h2
