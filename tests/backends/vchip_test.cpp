// Virtual chips: YAML chip descriptions and their errors, the memory cap, explicit copies,
// dtype support, the pacing model, and results bit-identical to the CPU backend.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "backends/registry.h"
#include "backends/vchip/vchip_backend.h"
#include "core/error.h"
#include "core/op_cost.h"
#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2 {
namespace {

constexpr const char* kTwoChips = R"(chips:
  - name: fast
    memory: 1MiB
    memory_bandwidth: 1e9
    peak_flops: {f32: 4e9, bf16: 8e9}
    dtypes: [f32, bf16, i32, i64]
  - name: slow
    count: 2
    memory: 64MiB
    memory_bandwidth: 2e9
    link_bandwidth: 1e9
    peak_flops: {f32: 1e9}
    dtypes: [f32, i32, i64]
    time_scale: 0.5
)";

std::string config_error(const std::string& yaml) {
  try {
    vchip::parse_chip_specs(yaml, "chips.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ChipSpec, ParsesEveryField) {
  auto specs = vchip::parse_chip_specs(kTwoChips, "chips.yaml");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "fast");
  EXPECT_EQ(specs[0].memory_bytes, 1 << 20);
  EXPECT_EQ(specs[0].link_bandwidth, 1e9);  // defaults to memory_bandwidth
  EXPECT_EQ(specs[0].peak_flops.at(DType::bf16), 8e9);
  EXPECT_TRUE(specs[0].dtypes.contains(DType::bf16));
  EXPECT_EQ(specs[1].count, 2);
  EXPECT_FALSE(specs[1].dtypes.contains(DType::bf16));
  EXPECT_EQ(specs[1].time_scale, 0.5);
  EXPECT_EQ(vchip::parse_bytes("1.5GB"), 1500000000);
  EXPECT_EQ(vchip::parse_bytes("3e6"), 3000000);
}

TEST(ChipSpec, ErrorsNameFileLineAndKey) {
  EXPECT_NE(config_error("chips:\n  - name: a\n    memroy: 1GiB\n")
                .find("chips.yaml:3: unknown chip key 'memroy'"),
            std::string::npos);
  EXPECT_NE(config_error("chips:\n  - name: a\n    memory: lots\n    memory_bandwidth: 1\n"
                         "    peak_flops: {f32: 1}\n    dtypes: [f32]\n")
                .find("chips.yaml:3: chip 'a' memory: "),
            std::string::npos);
  EXPECT_NE(config_error("chips:\n  - name: a\n    memory: 1GiB\n    memory_bandwidth: -5\n"
                         "    peak_flops: {f32: 1}\n    dtypes: [f32]\n")
                .find("chips.yaml:4: chip 'a' memory_bandwidth = -5 must be positive"),
            std::string::npos);
  EXPECT_NE(config_error("chips:\n  - name: a\n    memory: 1GiB\n    memory_bandwidth: 1\n"
                         "    peak_flops: {f32: 1}\n    dtypes: [f32, f13]\n")
                .find("unknown dtype 'f13'"),
            std::string::npos);
  EXPECT_NE(config_error("chips:\n  - name: a\n").find("chip is missing 'memory'"),
            std::string::npos);
  EXPECT_NE(config_error("chip: []").find("expected a top-level 'chips:' list"), std::string::npos);
  EXPECT_NE(config_error("chips: [a, b").find("chips.yaml:1: not valid YAML"), std::string::npos);
}

// Guards the document's shape: a scalar ("x") or list document made root["chips"] throw
// YAML::BadSubscript out of parse_chip_specs (fuzz finding chip_spec-yaml-badsubscript). It is a
// ConfigError naming the file.
TEST(ChipSpec, ADocumentThatIsNotAMapIsAConfigError) {
  for (const char* doc : {"x", "x\n", "- chips\n", "[1, 2]", "17"})
    EXPECT_NE(config_error(doc).find("chips.yaml: expected a top-level 'chips:' list"),
              std::string::npos)
        << doc;
}

TEST(ChipSpec, ShapesAndRangesAreValidated) {
  const std::string base = "chips:\n  - name: a\n    memory_bandwidth: 1\n";
  auto chip = [&](const std::string& rest) { return config_error(base + rest); };
  const std::string ok_rest = "    memory: 1GiB\n    peak_flops: {f32: 1}\n";
  EXPECT_NE(chip(ok_rest + "    dtypes: f32\n").find("chip 'a' dtypes must be a non-empty list"),
            std::string::npos);
  EXPECT_NE(chip(ok_rest + "    dtypes: [f32]\n    count: 0.5\n").find("must be a whole number"),
            std::string::npos);
  EXPECT_NE(chip(ok_rest + "    dtypes: [f32]\n    count: 1e12\n").find("must be a whole number"),
            std::string::npos);
  EXPECT_NE(chip("    memory: 1e30\n    peak_flops: {f32: 1}\n    dtypes: [f32]\n")
                .find("larger than 2^62 bytes"),
            std::string::npos);
  EXPECT_NE(chip(ok_rest + "    dtypes: [[f32]]\n").find("must be a single value"),
            std::string::npos);
  EXPECT_NE(chip("    memory: 1GiB\n    peak_flops: {bf16: 1}\n    dtypes: [f32, bf16]\n")
                .find("chip 'a' peak_flops has no f32 entry, which its dtypes list needs"),
            std::string::npos);
  EXPECT_NE(config_error("chips:\n  - name: 7\n    memory: 1GiB\n    memory_bandwidth: 1\n"
                         "    peak_flops: {f32: 1}\n    dtypes: [f32]\n")
                .find("chip name '7' must contain a letter"),
            std::string::npos);
  EXPECT_NE(config_error("chips:\n  - name: {x: 1}\n    memory: 1GiB\n    memory_bandwidth: 1\n"
                         "    peak_flops: {f32: 1}\n    dtypes: [f32]\n")
                .find("chips.yaml:2: name must be a single value"),
            std::string::npos);
}

TEST(ChipSpec, BuiltinChipsParse) {
  auto specs = vchip::builtin_chip_specs();
  ASSERT_GE(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "chip-a");
}

class VchipTest : public ::testing::Test {
 protected:
  std::unique_ptr<Runtime> make(double time_scale) {
    RuntimeOptions options = RuntimeOptions::from_env();
    options.chips = vchip::parse_chip_specs(kTwoChips, "chips.yaml");
    options.vchip_time_scale = time_scale;
    return create_runtime(options);
  }
  std::vector<float> random(int64_t n) {
    std::normal_distribution<float> normal;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    return v;
  }
  std::mt19937 rng{7};
};

TEST_F(VchipTest, DevicesFollowTheSpecs) {
  auto runtime = make(0);
  EXPECT_EQ(runtime->backend("vchip")->device_count(), 3);
  Device& slow = runtime->device("vchip:slow");
  EXPECT_EQ(slow.id().index, 1);
  EXPECT_EQ(slow.memory_kind(), MemoryKind::device);
  EXPECT_EQ(slow.props().memory_bytes, 64 << 20);
  EXPECT_EQ(&runtime->device("vchip:2"), &runtime->backend("vchip")->device(2));
  try {
    runtime->device("vchip:medium");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no device 'vchip:medium'; devices here: cpu:0"),
              std::string::npos);
  }
}

TEST_F(VchipTest, MemoryCapIsEnforcedWithAClearError) {
  auto runtime = make(0);
  Device& fast = runtime->device("vchip:fast");
  Tensor a = Tensor::empty({128, 1024}, DType::f32, fast);  // 512 KiB of the 1 MiB
  try {
    Tensor b = Tensor::empty({192, 1024}, DType::f32, fast);  // 768 KiB more
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("vchip:0 (fast) is out of memory: asked for 786432 bytes, 524288 of 1048576 "
                       "bytes free"),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(fast.allocator().stats().bytes_in_use, 512 << 10);
  a = Tensor();  // freed: now it fits
  EXPECT_NO_THROW(Tensor::empty({192, 1024}, DType::f32, fast));
}

TEST_F(VchipTest, UnsupportedDtypeIsUnsupportedUnlessFallingBack) {
  auto runtime = make(0);
  Device& slow = runtime->device("vchip:slow");
  EXPECT_FALSE(slow.supports(Op::add, DType::bf16));
  EXPECT_TRUE(runtime->device("vchip:fast").supports(Op::add, DType::bf16));
  Tensor x = Tensor::empty({4}, DType::bf16, slow);
  EXPECT_THROW(ops::add({.out = x, .a = x}), UnsupportedError);
  runtime->policy().fallback[size_t(Op::add)] = true;
  Tensor ones =
      tensor_from_floats(std::vector<float>{1, 2, 3, 4}, {4}, DType::bf16, runtime->cpu()).to(slow);
  ops::add({.out = ones, .a = ones, .alpha = 2});
  EXPECT_EQ(tensor_to_floats(ones), (std::vector<float>{2, 4, 6, 8}));
}

TEST_F(VchipTest, EveryTensorDtypeMustBeStorableOnTheChip) {
  auto runtime = make(0);
  Device& slow = runtime->device("vchip:slow");  // f32 only among floats
  Tensor out = Tensor::empty({2}, DType::f32, slow);
  Tensor half = Tensor::empty({2}, DType::f16, slow);
  try {
    ops::add({.out = out, .a = half});
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(
        std::string(e.what()).find("add: 'a' has dtype f16, which vchip:1 (slow) does not support"),
        std::string::npos)
        << e.what();
  }
}

TEST_F(VchipTest, PacingModelAndLowerBound) {
  auto runtime = make(1);
  auto& slow = static_cast<vchip::VchipDevice&>(runtime->device("vchip:slow"));
  Tensor a = tensor_from_floats(random(64 * 96), {64, 96}, DType::f32, runtime->cpu()).to(slow);
  Tensor b = tensor_from_floats(random(96 * 80), {96, 80}, DType::f32, runtime->cpu()).to(slow);
  Tensor c = Tensor::empty({64, 80}, DType::f32, slow);
  MatmulArgs args{.out = c, .a = a, .b = b};
  OpCost cost = op_cost_matmul(args);
  EXPECT_EQ(cost.flops, 2.0 * 64 * 80 * 96);
  EXPECT_EQ(cost.bytes, 4.0 * (64 * 96 + 96 * 80 + 64 * 80));
  double modelled = cost.flops / 1e9 + cost.bytes / 2e9;
  EXPECT_DOUBLE_EQ(slow.modelled_seconds(cost), modelled);
  // On an idle chip (the previous kernel ended long ago) the kernel completes no earlier than the
  // modelled time times the chip's time_scale (0.5). Ten back-to-back kernels take at least ten
  // times that: the chip's clock runs on from the first. Lower bounds only (sleep_until
  // guarantees them), so this cannot flake.
  auto& stream = static_cast<vchip::PacedStream&>(slow.default_stream());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  double before = stream.modelled_seconds();
  auto start = std::chrono::steady_clock::now();
  ops::matmul(args);
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(elapsed, 0.5 * modelled);
  EXPECT_DOUBLE_EQ(stream.modelled_seconds() - before, modelled);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const PacingStats pacing_before = *slow.pacing();
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) ops::matmul(args);
  elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(elapsed, 10 * 0.5 * modelled);
  const PacingStats pacing = *slow.pacing();
  EXPECT_EQ(pacing.events - pacing_before.events, 10);
  EXPECT_NEAR(pacing.modelled_s - pacing_before.modelled_s, 10 * 0.5 * modelled, 1e-12);
  EXPECT_FALSE(runtime->cpu().pacing().has_value());  // a real device reports none
}

TEST_F(VchipTest, ResultsAreBitIdenticalToCpu) {
  auto runtime = make(0);
  Device& cpu = runtime->cpu();
  for (const char* spec : {"vchip:fast", "vchip:slow"}) {
    Device& chip = runtime->device(spec);
    auto x = random(2 * 33 * 64), w = random(96 * 64), g = random(64);
    auto run = [&](Device& d) {
      Tensor xt = tensor_from_floats(x, {2, 33, 64}, DType::f32, cpu).to(d);
      Tensor wt = tensor_from_floats(w, {96, 64}, DType::f32, cpu).to(d);
      Tensor gt = tensor_from_floats(g, {64}, DType::f32, cpu).to(d);
      Tensor h = Tensor::empty({2, 33, 64}, DType::f32, d),
             r = Tensor::empty({2, 33}, DType::f32, d);
      ops::rms_norm_fwd({.out = h, .rstd = r, .x = xt, .weight = gt});
      Tensor qkv = Tensor::empty({2, 33, 96}, DType::f32, d);
      ops::matmul({.out = qkv, .a = h, .b = wt, .trans_b = true});
      Tensor q = qkv.slice(2, 0, 64).contiguous().view({2, 33, 4, 16});
      Tensor kv = qkv.slice(2, 64, 96).contiguous().view({2, 33, 2, 16});
      Tensor o = Tensor::empty({2, 33, 4, 16}, DType::f32, d),
             lse = Tensor::empty({2, 4, 33}, DType::f32, d);
      ops::attention_fwd({.out = o, .lse = lse, .q = q, .k = kv, .v = kv});
      return o.to(cpu);
    };
    Tensor on_chip = run(chip), on_cpu = run(cpu);
    EXPECT_EQ(std::memcmp(on_chip.data(), on_cpu.data(), size_t(on_cpu.nbytes())), 0) << spec;
  }
}

}  // namespace
}  // namespace h2
