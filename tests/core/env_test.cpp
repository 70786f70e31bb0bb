// The knob table: defaults, parsing, and errors that name the knob and the value.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/env.h"
#include "core/error.h"
#include "core/op_catalogue.h"
#include "core/runtime.h"

namespace h2 {
namespace {

TEST(Env, DefaultsListsAndParsing) {
  unsetenv("H2_CHECK_OPS");
  EXPECT_TRUE(env_list("H2_CHECK_OPS").empty());
  setenv("H2_CHECK_OPS", "matmul,,rope_fwd", 1);
  EXPECT_EQ(env_list("H2_CHECK_OPS"), (std::vector<std::string>{"matmul", "rope_fwd"}));
  setenv("H2_VCHIP_TIME_SCALE", "0.25", 1);
  EXPECT_DOUBLE_EQ(env_double("H2_VCHIP_TIME_SCALE", 0, 10), 0.25);
  for (const char* bad : {"-1", "nan", "inf", "1e999"}) {
    setenv("H2_VCHIP_TIME_SCALE", bad, 1);
    EXPECT_THROW(env_double("H2_VCHIP_TIME_SCALE", 0, 10), ConfigError) << bad;
  }
  setenv("H2_NUM_THREADS", "-4", 1);
  try {
    env_int("H2_NUM_THREADS", 0, 64);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("H2_NUM_THREADS=-4 is outside [0, 64]"), std::string::npos)
        << e.what();
  }
  unsetenv("H2_NUM_THREADS");
  setenv("H2_VCHIP_TIME_SCALE", "fast", 1);
  try {
    env_double("H2_VCHIP_TIME_SCALE", 0, 10);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("H2_VCHIP_TIME_SCALE='fast'"), std::string::npos);
  }
  unsetenv("H2_VCHIP_TIME_SCALE");
  unsetenv("H2_CHECK_OPS");
}

TEST(Env, UndeclaredKnobIsAProgrammingError) {
  EXPECT_THROW(env_string("H2_NOT_A_KNOB"), Error);
}

TEST(Env, EveryKnobIsDocumented) {
  for (const EnvKnob& knob : env_knobs()) {
    EXPECT_TRUE(knob.name.starts_with("H2_")) << knob.name;
    EXPECT_FALSE(knob.help.empty()) << knob.name;
  }
}

TEST(Env, UnknownOpInPolicyNamesTheKnob) {
  setenv("H2_FALLBACK_OPS", "matmul,softmaxx", 1);
  try {
    DispatchPolicy::from_env();
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("H2_FALLBACK_OPS: unknown op 'softmaxx'"),
              std::string::npos)
        << e.what();
  }
  unsetenv("H2_FALLBACK_OPS");
  setenv("H2_CHECK_OPS", "all", 1);
  DispatchPolicy p = DispatchPolicy::from_env();
  EXPECT_TRUE(p.checks(Op::attention_bwd));
  EXPECT_FALSE(p.falls_back(Op::matmul));
  unsetenv("H2_CHECK_OPS");
}

}  // namespace
}  // namespace h2
