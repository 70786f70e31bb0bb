// Chip profiles (parallel/planner/profile.h): the JSON file form keeps every field (a file
// without an origin reads as measured); a key that differs in one field is refused naming that
// field; the key holds the chip's speeds and time scale but not its memory capacity, which
// changes no time or byte a profile holds (the same key and file for any capacity); malformed
// text, another format and another format version are refused with a ConfigError naming the
// source; and ChipProfile::cost is exact at measured sizes, linear between them, extended beyond
// the largest (never below the largest's figure) and scaled below the smallest, checked against
// hand-computed values.
#include "parallel/planner/profile.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/error.h"

namespace h2::parallel::planner {
namespace {

ModelShape shape() {
  return {.vocab_size = 100,
          .dim = 24,
          .n_layers = 3,
          .n_heads = 2,
          .n_kv_heads = 1,
          .ffn_dim = 40,
          .seq_len = 16,
          .tie_embeddings = true};
}

// Every field distinct, with values that are not round in binary (0.1, 1/3...).
UnitCost unit(double base, int64_t bytes) {
  return {.forward_s = base,
          .backward_s = base * 2.1,
          .input_s = base * 1.3,
          .weight_s = base * 0.8,
          .optimizer_s = base / 3,
          .stash_bytes = bytes,
          .forward_workspace_bytes = bytes + 1,
          .workspace_bytes = bytes + 2,
          .deferred_bytes = bytes + 3};
}

ChipProfile sample() {
  ChipProfile p;
  p.key = {.chip = "chip-b",
           .chip_spec = "memory_bandwidth=1e+09 link_bandwidth=1e+08 peak_flops= time_scale=2",
           .model = shape(),
           .dtype = DType::bf16,
           .h2_version = "9.8.7-test",
           .origin = "datasheet (efficiency: GEMM 0.5)"};
  p.overrun_share = 0.0137;
  p.by_rows[1] = {unit(0.1, 1000), unit(0.7, 2000), unit(0.3, 3000)};
  p.by_rows[2] = {unit(0.2, 1100), unit(1.3, 2100), unit(0.5, 3100)};
  p.by_rows[8] = {unit(0.9, 1900), unit(5.1, 2900), unit(2.3, 3900)};
  return p;
}

void expect_same(const UnitCost& a, const UnitCost& b) {
  EXPECT_EQ(a.forward_s, b.forward_s);
  EXPECT_EQ(a.backward_s, b.backward_s);
  EXPECT_EQ(a.input_s, b.input_s);
  EXPECT_EQ(a.weight_s, b.weight_s);
  EXPECT_EQ(a.optimizer_s, b.optimizer_s);
  EXPECT_EQ(a.stash_bytes, b.stash_bytes);
  EXPECT_EQ(a.forward_workspace_bytes, b.forward_workspace_bytes);
  EXPECT_EQ(a.workspace_bytes, b.workspace_bytes);
  EXPECT_EQ(a.deferred_bytes, b.deferred_bytes);
}

template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return {};
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Profile, JsonRoundTripKeepsEveryField) {
  const ChipProfile p = sample();
  const ChipProfile q = profile_from_json(to_json(p), "sample.json");
  EXPECT_EQ(q.key.chip, "chip-b");
  EXPECT_EQ(q.key.chip_spec, p.key.chip_spec);
  EXPECT_EQ(q.key.model.vocab_size, 100);
  EXPECT_EQ(q.key.model.dim, 24);
  EXPECT_EQ(q.key.model.n_layers, 3);
  EXPECT_EQ(q.key.model.n_heads, 2);
  EXPECT_EQ(q.key.model.n_kv_heads, 1);
  EXPECT_EQ(q.key.model.ffn_dim, 40);
  EXPECT_EQ(q.key.model.seq_len, 16);
  EXPECT_TRUE(q.key.model.tie_embeddings);
  EXPECT_EQ(q.key.dtype, DType::bf16);
  EXPECT_EQ(q.key.h2_version, "9.8.7-test");
  EXPECT_TRUE(q.key == p.key);
  EXPECT_EQ(q.overrun_share, 0.0137);
  EXPECT_EQ(q.key.origin, "datasheet (efficiency: GEMM 0.5)");
  ASSERT_EQ(q.by_rows.size(), 3u);
  for (const auto& [rows, costs] : p.by_rows) {
    ASSERT_TRUE(q.by_rows.contains(rows)) << rows;
    for (int k = 0; k < kUnitKinds; ++k) {
      SCOPED_TRACE(::testing::Message() << rows << " rows, unit kind " << k);
      expect_same(q.by_rows.at(rows)[size_t(k)], costs[size_t(k)]);
    }
  }
  // And the text is stable: writing what was read gives the same document.
  EXPECT_EQ(to_json(q), to_json(p));
  // A file written before profiles had an origin was measured.
  std::string text = to_json(p);
  const size_t at = text.find("\"origin\"");
  ASSERT_NE(at, std::string::npos) << text;
  text.erase(at, text.find('\n', at) + 1 - at);
  ASSERT_EQ(text.find("origin"), std::string::npos) << text;
  EXPECT_EQ(profile_from_json(text, "old.json").key.origin, "measured");
}

TEST(Profile, KeyDifferenceNamesTheField) {
  const ProfileKey a = sample().key;
  EXPECT_EQ(a.difference(a), "");
  ProfileKey b = a;
  b.chip = "chip-c";
  EXPECT_TRUE(has(a.difference(b), "chip chip-b vs chip-c")) << a.difference(b);
  b = a;
  b.chip_spec = "memory_bandwidth=2e+09";
  EXPECT_TRUE(has(a.difference(b), "spec")) << a.difference(b);
  EXPECT_TRUE(has(a.difference(b), "memory_bandwidth=2e+09")) << a.difference(b);
  b = a;
  b.model.dim = 32;
  EXPECT_EQ(a.difference(b).rfind("model", 0), 0u) << a.difference(b);
  EXPECT_TRUE(has(a.difference(b), "\"dim\":24")) << a.difference(b);
  EXPECT_TRUE(has(a.difference(b), "\"dim\":32")) << a.difference(b);
  b = a;
  b.model.tie_embeddings = false;
  EXPECT_EQ(a.difference(b).rfind("model", 0), 0u) << a.difference(b);
  b = a;
  b.dtype = DType::f32;
  EXPECT_TRUE(has(a.difference(b), "dtype bf16 vs f32")) << a.difference(b);
  b = a;
  b.h2_version = "0.0.1";
  EXPECT_TRUE(has(a.difference(b), "version 9.8.7-test vs 0.0.1")) << a.difference(b);
  b = a;
  b.origin = "measured";
  EXPECT_TRUE(has(a.difference(b), "origin 'datasheet (efficiency: GEMM 0.5)' vs 'measured'"))
      << a.difference(b);
  EXPECT_FALSE(a == b);
}

TEST(Profile, KeyHoldsTheSpecAndTheTimeScale) {
  ChipSpec chip{.name = "chip-a",
                .memory_bytes = 1 << 20,
                .memory_bandwidth = 1e9,
                .link_bandwidth = 1e8,
                .peak_flops = {{DType::f32, 1e12}},
                .time_scale = 2};
  const ProfileKey k = profile_key(chip, 3, shape(), DType::f32);
  EXPECT_EQ(k.chip, "chip-a");
  EXPECT_TRUE(has(k.chip_spec, "time_scale=6")) << k.chip_spec;  // chip x cluster scale
  EXPECT_TRUE(has(k.chip_spec, "link_bandwidth=1e+08")) << k.chip_spec;
  // The capacity changes no time or byte a profile holds: it is not in the key, and a chip of
  // another capacity has the same key and the same file.
  EXPECT_FALSE(has(k.chip_spec, "memory=")) << k.chip_spec;
  EXPECT_FALSE(has(k.chip_spec, std::to_string(1 << 20))) << k.chip_spec;
  ChipSpec larger = chip;
  larger.memory_bytes = 4 << 20;
  const ProfileKey l = profile_key(larger, 3, shape(), DType::f32);
  EXPECT_EQ(k.difference(l), "");
  EXPECT_TRUE(k == l);
  EXPECT_EQ(profile_file_name(k), profile_file_name(l));
  // What does change a profile's times does change the key.
  ChipSpec other = chip;
  other.memory_bandwidth = 2e9;
  EXPECT_TRUE(has(k.difference(profile_key(other, 3, shape(), DType::f32)), "spec"));
  other = chip;
  other.peak_flops[DType::f32] = 2e12;
  EXPECT_TRUE(has(k.difference(profile_key(other, 3, shape(), DType::f32)), "spec"));
  EXPECT_TRUE(k.model == shape());
  EXPECT_EQ(k.dtype, DType::f32);
  EXPECT_TRUE(has(k.difference(profile_key(chip, 4, shape(), DType::f32)), "spec"));
  chip.link_bandwidth = 2e8;
  EXPECT_TRUE(has(k.difference(profile_key(chip, 3, shape(), DType::f32)), "spec"));
  // One file per key: the name starts with the chip and dtype and changes with the key.
  const std::string name = profile_file_name(k);
  EXPECT_EQ(name.rfind("chip-a.f32.", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - 5), ".json");
  EXPECT_NE(name, profile_file_name(profile_key(chip, 3, shape(), DType::f32)));
  // A profile made otherwise than measured is another profile, in another file.
  EXPECT_EQ(k.origin, "measured");
  const ProfileKey paper = profile_key(larger, 3, shape(), DType::f32, "datasheet (GEMM 0.5)");
  EXPECT_EQ(paper.origin, "datasheet (GEMM 0.5)");
  EXPECT_TRUE(has(k.difference(paper), "origin")) << k.difference(paper);
  EXPECT_NE(profile_file_name(k), profile_file_name(paper));
}

TEST(Profile, BadTextIsRefusedNamingTheSource) {
  EXPECT_TRUE(has(config_error([] { profile_from_json("{ not json", "profiles/x.json"); }),
                  "profiles/x.json: not a profile"));
  std::string text = to_json(sample());
  // Another format version.
  std::string old = text;
  const size_t at = old.find("\"format_version\": 2");
  ASSERT_NE(at, std::string::npos) << text;
  old.replace(at, 19, "\"format_version\": 1");
  const std::string why = config_error([&] { profile_from_json(old, "profiles/old.json"); });
  EXPECT_TRUE(has(why, "profiles/old.json: profile format 1")) << why;
  // Another format.
  std::string other = text;
  other.replace(other.find("h2-profile"), 10, "h2-checkpt");
  EXPECT_TRUE(
      has(config_error([&] { profile_from_json(other, "o.json"); }), "o.json: not an H2 profile"));
  // A field missing, a field of the wrong type, not an object.
  std::string missing = text;
  missing.replace(missing.find("\"stash_bytes\""), 13, "\"stash_bytez\"");
  EXPECT_TRUE(has(config_error([&] { profile_from_json(missing, "m.json"); }),
                  "m.json: malformed profile"));
  std::string typed = text;
  typed.replace(typed.find("\"chip-b\""), 8, "17");
  EXPECT_TRUE(has(config_error([&] { profile_from_json(typed, "t.json"); }), "t.json:"));
  EXPECT_TRUE(has(config_error([] { profile_from_json("[1, 2]", "a.json"); }), "a.json:"));
}

// Guards the numbers of a profile file. A rows key that is not a whole size made std::stoll throw
// std::invalid_argument or out_of_range past the catch (fuzz finding profile-stoll); a key <= 0
// overflowed ChipProfile::cost (profile-rows-overflow); an integer field holding a number outside
// int64 (1e300, 2^64, which nlohmann holds as a double) was cast with undefined behaviour
// (profile-floatcast). Each is a ConfigError naming the source, the field and the value.
TEST(Profile, RowsKeysAndIntegersOutOfRangeAreRefusedNamingTheValue) {
  const std::string text = to_json(sample());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string changed = text;
    const size_t at = changed.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? changed : changed.replace(at, from.size(), to);
  };
  for (const std::string key : {"x", "0", "-1", "-9223372036854775808", "99999999999999999999",
                                "2147483649", "8 ", "1e3", ""}) {
    const std::string why =
        config_error([&] { profile_from_json(with("\"8\": {", "\"" + key + "\": {"), "r.json"); });
    EXPECT_TRUE(has(why, "r.json: rows key '" + key + "' is not a micro-batch size")) << why;
  }
  EXPECT_EQ(profile_from_json(with("\"8\": {", "\"2147483648\": {"), "r.json").by_rows.size(), 3u);
  // Written -> shown (2^64 is read as the double nearest to it).
  for (const auto& written_shown : {std::pair<std::string, std::string>{"1e+300", "1e+300"},
                                    {"-1e+300", "-1e+300"},
                                    {"18446744073709551616", "1.8446744073709552e+19"},
                                    {"2.5", "2.5"},
                                    {"-3", "-3"}}) {
    const std::string value = written_shown.first, shown = written_shown.second;
    const std::string why = config_error(
        [&] { profile_from_json(with("\"dim\": 24,", "\"dim\": " + value + ","), "d.json"); });
    EXPECT_TRUE(has(why, "d.json: model.dim = " + shown + " is not an integer")) << why;
  }
  for (const std::string value : {"1e+300", "4611686018427387905", "-1", "0.5"}) {
    const std::string why = config_error([&] {
      profile_from_json(with("\"stash_bytes\": 1000,", "\"stash_bytes\": " + value + ","),
                        "s.json");
    });
    EXPECT_TRUE(has(why, "s.json: rows 1 embedding stash_bytes = " + value)) << why;
  }
}

// Rows 2, 4 and 8 measured; every field of a unit is (rows-dependent) linear data, so each
// expected value is a hand evaluation of the documented rule.
ChipProfile measured() {
  ChipProfile p;
  p.key.chip = "chip-a";
  auto u = [](double f, int64_t stash) {
    return UnitCost{.forward_s = f,
                    .backward_s = 2 * f,
                    .input_s = f,
                    .weight_s = f / 2,
                    .optimizer_s = 0.25,
                    .stash_bytes = stash,
                    .forward_workspace_bytes = 10,
                    .workspace_bytes = 2 * stash,
                    .deferred_bytes = stash / 2};
  };
  p.by_rows[2] = {u(1, 100), u(2, 1000), u(3, 10)};
  p.by_rows[4] = {u(3, 300), u(4, 1800), u(5, 30)};
  p.by_rows[8] = {u(4, 500), u(10, 3000), u(6, 71)};
  return p;
}

TEST(Profile, CostIsExactAtMeasuredSizes) {
  const ChipProfile p = measured();
  expect_same(p.cost(UnitKind::block, 4), p.by_rows.at(4)[1]);
  expect_same(p.cost(UnitKind::embedding, 2), p.by_rows.at(2)[0]);
  expect_same(p.cost(UnitKind::head, 8), p.by_rows.at(8)[2]);
}

TEST(Profile, CostIsLinearBetweenMeasuredSizes) {
  const ChipProfile p = measured();
  // 3 rows: halfway between 2 and 4.
  const UnitCost b3 = p.cost(UnitKind::block, 3);
  EXPECT_DOUBLE_EQ(b3.forward_s, 3.0);
  EXPECT_DOUBLE_EQ(b3.backward_s, 6.0);
  EXPECT_DOUBLE_EQ(b3.weight_s, 1.5);
  EXPECT_DOUBLE_EQ(b3.optimizer_s, 0.25);
  EXPECT_EQ(b3.stash_bytes, 1400);
  EXPECT_EQ(b3.forward_workspace_bytes, 10);
  EXPECT_EQ(b3.workspace_bytes, 2800);
  EXPECT_EQ(b3.deferred_bytes, 700);
  // 5 rows: a quarter of the way from 4 to 8; bytes round to the nearest.
  const UnitCost h5 = p.cost(UnitKind::head, 5);
  EXPECT_DOUBLE_EQ(h5.forward_s, 5.25);
  EXPECT_EQ(h5.stash_bytes, 40);      // 30 + 41 / 4 = 40.25
  EXPECT_EQ(h5.deferred_bytes, 20);   // 15 + 20 / 4 = 20
  EXPECT_EQ(h5.workspace_bytes, 81);  // 60 + 82 / 4 = 80.5, rounded away from 0
  const UnitCost e7 = p.cost(UnitKind::embedding, 7);
  EXPECT_DOUBLE_EQ(e7.forward_s, 3.75);  // 3 + 1 x 3/4
  EXPECT_EQ(e7.stash_bytes, 450);
}

TEST(Profile, CostExtendsTheLastTwoBeyondAndScalesBelow) {
  const ChipProfile p = measured();
  // 12 rows: from (4, 8) on: t = (12 - 4) / 4 = 2.
  const UnitCost b12 = p.cost(UnitKind::block, 12);
  EXPECT_DOUBLE_EQ(b12.forward_s, 16.0);  // 4 + 2 x 6
  EXPECT_DOUBLE_EQ(b12.backward_s, 32.0);
  EXPECT_EQ(b12.stash_bytes, 4200);  // 1800 + 2 x 1200
  // 1 row: half of the 2-row figures (towards 0 at 0 rows).
  const UnitCost b1 = p.cost(UnitKind::block, 1);
  EXPECT_DOUBLE_EQ(b1.forward_s, 1.0);
  EXPECT_DOUBLE_EQ(b1.optimizer_s, 0.125);
  EXPECT_EQ(b1.stash_bytes, 500);
  EXPECT_EQ(b1.forward_workspace_bytes, 5);
  // One measured size: proportional to the rows both ways.
  ChipProfile one;
  one.by_rows[4] = measured().by_rows.at(4);
  EXPECT_DOUBLE_EQ(one.cost(UnitKind::block, 8).forward_s, 8.0);
  EXPECT_EQ(one.cost(UnitKind::block, 6).stash_bytes, 2700);
  EXPECT_DOUBLE_EQ(one.cost(UnitKind::block, 2).forward_s, 2.0);
  // Two noisy sizes where the larger measured cheaper: beyond it the cost stays at its figure
  // and never shrinks (nor turns negative) with the rows; between them it is still linear.
  ChipProfile noisy;
  noisy.by_rows[2] = measured().by_rows.at(4);  // forward 3, stash 300 (embedding)
  noisy.by_rows[4] = measured().by_rows.at(2);  // forward 1, stash 100
  for (int64_t rows : {5, 8, 100}) {
    const UnitCost e = noisy.cost(UnitKind::embedding, rows);
    EXPECT_DOUBLE_EQ(e.forward_s, 1.0) << rows;
    EXPECT_DOUBLE_EQ(e.backward_s, 2.0) << rows;
    EXPECT_EQ(e.stash_bytes, 100) << rows;
    EXPECT_EQ(e.workspace_bytes, 200) << rows;
  }
  EXPECT_DOUBLE_EQ(noisy.cost(UnitKind::embedding, 3).forward_s, 2.0);
}

TEST(Profile, CostNeedsAMeasurementAndPositiveRows) {
  ChipProfile empty;
  empty.key.chip = "chip-z";
  EXPECT_THROW(empty.cost(UnitKind::block, 2), Error);
  EXPECT_THROW(measured().cost(UnitKind::block, 0), Error);
}

}  // namespace
}  // namespace h2::parallel::planner
