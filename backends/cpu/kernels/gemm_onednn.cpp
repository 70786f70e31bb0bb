// oneDNN matmul primitives, made once per GEMM shape and kept (see gemm_onednn.h).
#include "backends/cpu/kernels/gemm_onednn.h"

#include <omp.h>

#include <dnnl.hpp>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "core/cpu_features.h"
#include "core/env.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

using dnnl::memory;

constexpr size_t kMaxPrimitives = 512;  // kept primitives per device, a few KB each

// Everything a primitive is made for. alpha is given at run time (alpha_desc's one-element
// tensor), so only whether there is one is part of the key: an FP8 GEMM's alpha carries its
// operands' per-tensor scales and changes with every call, and a primitive made per value (its
// kernel JIT-compiled, about 600 times per fp8_current step of numerics-256) cost more than the
// multiply. oneDNN 2.x fixes the sum's factor at creation, so beta is (it is 0 or 1 in practice).
struct Key {
  GemmDims dims;
  bool scaled;  // alpha != 1
  float beta;
  DType in, out;
  bool user_scratchpad = false;  // run_alone's primitives: the caller passes the workspace
  bool operator==(const Key& o) const {
    const GemmDims &a = dims, &b = o.dims;
    return a.batch == b.batch && a.m == b.m && a.n == b.n && a.k == b.k && a.trans_a == b.trans_a &&
           a.trans_b == b.trans_b && a.b_shared == b.b_shared && a.lda == b.lda && a.ldb == b.ldb &&
           scaled == o.scaled && beta == o.beta && in == o.in && out == o.out &&
           user_scratchpad == o.user_scratchpad;
  }
};

struct KeyHash {
  size_t operator()(const Key& key) const {
    size_t h = 0;
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    const GemmDims& d = key.dims;
    for (int64_t v : {d.batch, d.m, d.n, d.k, d.lda, d.ldb}) mix(std::hash<int64_t>{}(v));
    mix(size_t(d.trans_a) | size_t(d.trans_b) << 1 | size_t(d.b_shared) << 2);
    mix(size_t(key.scaled));
    mix(std::hash<float>{}(key.beta));
    mix(size_t(key.in) << 8 | size_t(key.out) | size_t(key.user_scratchpad) << 16);
    return h;
  }
};

memory::data_type onednn_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return memory::data_type::f32;
    case DType::bf16:
      return memory::data_type::bf16;
    default:
      H2_THROW(Error, "oneDNN gemm: element type {} is not f32 or bf16", dtype_name(dtype));
  }
}

// Row-major (rows, cols) matrices, batched, as strided descriptors; a transposed operand is the
// same buffer with its two inner strides swapped. ld: the stored row stride (0: dense). A shared
// operand has batch extent 1, which oneDNN broadcasts.
memory::desc matrix_desc(int64_t batch, int64_t rows, int64_t cols, bool stored_transposed,
                         DType dtype, int64_t ld = 0) {
  const int64_t row_stride = ld > 0 ? ld : stored_transposed ? rows : cols;
  const memory::dims strides = stored_transposed ? memory::dims{rows * cols, 1, row_stride}
                                                 : memory::dims{rows * cols, row_stride, 1};
  return memory::desc({batch, rows, cols}, onednn_type(dtype), strides);
}

// alpha as the second operand of a binary multiply post-op: one f32, broadcast over out. (Not a
// runtime output scale, with which oneDNN 2.6 leaves its brgemm kernels for gemm:jit: 4-9% slower
// on nvfp4's and fp8_current's forward and dgrad GEMMs, whose alpha carries the global scales.)
memory::desc alpha_desc() {
  return memory::desc({1, 1, 1}, memory::data_type::f32, memory::format_tag::abc);
}

struct Descs {
  memory::desc a, b, c;
};

Descs descs(const Key& key) {
  const GemmDims& d = key.dims;
  return {matrix_desc(d.batch, d.m, d.k, d.trans_a, key.in, d.lda),
          matrix_desc(d.b_shared ? 1 : d.batch, d.k, d.n, d.trans_b, key.in, d.ldb),
          matrix_desc(d.batch, d.m, d.n, false, key.out)};
}

}  // namespace

struct OneDnnGemm::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mutex;  // guards the cache (primitives themselves are immutable)
  // A primitive and, for run_alone's, the workspace it expects.
  struct Made {
    dnnl::matmul matmul;
    memory::desc scratchpad;
  };
  std::unordered_map<Key, Made, KeyHash> primitives;

  Made make(const Key& key) const {
    const Descs m = descs(key);
    dnnl::primitive_attr attr;
    dnnl::post_ops ops;
    if (key.scaled) ops.append_binary(dnnl::algorithm::binary_mul, alpha_desc());
    if (key.beta != 0.0f) ops.append_sum(key.beta);
    attr.set_post_ops(ops);
    if (key.user_scratchpad) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(m.a, m.b, m.c), attr, engine);
    return {dnnl::matmul(pd), pd.scratchpad_desc()};
  }

  Made primitive(const Key& key) {
    std::lock_guard lock(mutex);
    auto it = primitives.find(key);
    if (it == primitives.end()) {
      // Shapes that keep changing (generation's growing context) would grow the cache without
      // end; a training step has a few dozen.
      if (primitives.size() >= kMaxPrimitives) primitives.clear();
      it = primitives.emplace(key, make(key)).first;
    }
    return it->second;  // handles: copies share the primitive
  }
};

namespace {

// Holds oneDNN to H2_CPU_MAX_ISA (core/cpu_features.h), which the caller has parsed. oneDNN
// takes a cap only before its first dispatch, so a second device's call is refused; what
// matters is that the ISA it dispatches to is within the cap (cpu_isa_t values are nested bit
// masks: a lower ISA's bits are a subset of a higher one's).
void cap_onednn_dispatch(CpuIsaLevel cap) {
  dnnl_cpu_isa_t limit = dnnl_cpu_isa_all;
  switch (cap) {
    case CpuIsaLevel::avx2:
      limit = dnnl_cpu_isa_avx2;
      break;
    case CpuIsaLevel::avx512:
      limit = dnnl_cpu_isa_avx512_core;
      break;
    case CpuIsaLevel::avx512_bf16:
      limit = dnnl_cpu_isa_avx512_core_bf16;
      break;
    case CpuIsaLevel::amx:
      limit = dnnl_cpu_isa_avx512_core_amx;
      break;
    case CpuIsaLevel::native:
      return;
  }
  // Refused after oneDNN's first dispatch (a second device) or where the library was built
  // without the control: what the check below needs is only that it holds.
  const dnnl_status_t set = dnnl_set_max_cpu_isa(limit);
  const dnnl_cpu_isa_t effective = dnnl_get_effective_cpu_isa();
  if ((unsigned(effective) & ~unsigned(limit)) != 0)
    H2_THROW(ConfigError,
             "H2_CPU_MAX_ISA={} cannot hold oneDNN, which dispatches to ISA {:#x} (setting its "
             "limit returned status {}: the cap must be set before the process's first GEMM, in "
             "a oneDNN built with that control)",
             cpu_isa_level_name(cap), unsigned(effective), int(set));
}

// Whether oneDNN dispatches to bf16 instructions (its effective ISA, which ONEDNN_MAX_CPU_ISA
// may lower too, contains AVX512_CORE_BF16's bits; AMX's contain them).
bool onednn_has_bf16_instructions() {
  const unsigned bf16 = unsigned(dnnl_cpu_isa_avx512_core_bf16);
  return (unsigned(dnnl_get_effective_cpu_isa()) & bf16) == bf16;
}

}  // namespace

OneDnnGemm::OneDnnGemm() {
  const std::string max_isa = env_string("H2_CPU_MAX_ISA");
  CpuIsaLevel cap = CpuIsaLevel::native;
  if (!parse_cpu_isa_level(max_isa.c_str(), &cap))
    H2_THROW(ConfigError, "H2_CPU_MAX_ISA='{}' is not avx2, avx512, avx512_bf16, amx or native",
             max_isa);
  // cpu_has() read the variable when the process started; a value set since would be ignored.
  if (cap != cpu_isa_cap())
    H2_THROW(ConfigError,
             "H2_CPU_MAX_ISA='{}' was set after the process started, which read '{}': set it in "
             "the environment the process starts with",
             max_isa, cpu_isa_level_name(cpu_isa_cap()));
  cap_onednn_dispatch(cap);  // before this device's engine and first primitive
  impl_ = std::make_unique<Impl>();
  // bf16 GEMMs only with the CPU's bf16 instructions: oneDNN 2.6 also makes bf16 primitives on
  // AVX-512 without them, emulated at 60-80 GFLOP/s where its f32 GEMMs run at 210-230 and
  // widening to f32 at 130-190 (tiny's GEMMs on a Zen 4 capped to AVX512_CORE, 2 threads; the
  // step took 2.2x its f32 step, docs/performance.md). And only where a primitive can be made.
  native_bf16_ = (cpu_has(CpuFeature::avx512_bf16) || cpu_has(CpuFeature::amx_bf16)) &&
                 onednn_has_bf16_instructions();
  if (native_bf16_) {
    try {
      impl_->make({GemmDims{1, 16, 16, 16}, false, 0.0f, DType::bf16, DType::bf16});
    } catch (const dnnl::error&) {
      native_bf16_ = false;
    }
  }
}

OneDnnGemm::~OneDnnGemm() = default;

std::string OneDnnGemm::kernel_isa() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return fmt::format("{:#x}", unsigned(isa));
  }
}

namespace {

Key key_of(const GemmCall& call, bool user_scratchpad) {
  const GemmDims& d = call.dims;
  H2_CHECK(d.batch == 1 || (d.lda == 0 && d.ldb == 0),
           "oneDNN gemm: row strides (lda {}, ldb {}) need batch 1, not {}", d.lda, d.ldb, d.batch);
  return {call.dims, call.alpha != 1.0f, call.beta, call.in, call.out, user_scratchpad};
}

[[noreturn]] void throw_refused(const GemmCall& call, const dnnl::error& e) {
  const GemmDims& d = call.dims;
  H2_THROW(Error,
           "oneDNN matmul failed ({}, status {}) for batch {} x ({} x {} x {}){}{}, {} -> {}",
           e.what(), int(e.status), d.batch, d.m, d.n, d.k, d.trans_a ? ", a transposed" : "",
           d.trans_b ? ", b transposed" : "", dtype_name(call.in), dtype_name(call.out));
}

}  // namespace

void OneDnnGemm::execute(const GemmCall& call, bool user_scratchpad, const void* a, const void* b,
                         void* out, void* scratchpad, size_t bytes) {
  const Key key = key_of(call, user_scratchpad);
  try {
    const Impl::Made made = impl_->primitive(key);
    const Descs m = descs(key);
    // A stream per call (a few hundred ns): calls from several threads never share one.
    dnnl::stream stream(impl_->engine);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(m.a, impl_->engine, const_cast<void*>(a))},
        {DNNL_ARG_WEIGHTS, memory(m.b, impl_->engine, const_cast<void*>(b))},
        {DNNL_ARG_DST, memory(m.c, impl_->engine, out)}};
    float alpha = call.alpha;
    if (key.scaled)
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   memory(alpha_desc(), impl_->engine, &alpha));
    if (user_scratchpad) {
      H2_CHECK(made.scratchpad.get_size() <= bytes,
               "oneDNN gemm: the primitive needs {} bytes of scratchpad, given {}",
               made.scratchpad.get_size(), bytes);
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(made.scratchpad, impl_->engine, scratchpad));
    }
    made.matmul.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw_refused(call, e);
  }
}

void OneDnnGemm::run(const GemmCall& call, const void* a, const void* b, void* out, int threads) {
  // oneDNN's OpenMP runtime uses the calling thread's team size; in a parallel region it runs
  // on the calling thread alone.
  if (!omp_in_parallel() && omp_get_max_threads() != threads) omp_set_num_threads(threads);
  execute(call, false, a, b, out, nullptr, 0);
}

size_t OneDnnGemm::scratchpad_bytes(const GemmCall& call) {
  try {
    return impl_->primitive(key_of(call, true)).scratchpad.get_size();
  } catch (const dnnl::error& e) {
    throw_refused(call, e);
  }
}

void OneDnnGemm::run_alone(const GemmCall& call, const void* a, const void* b, void* out,
                           void* scratchpad, size_t bytes) {
  execute(call, true, a, b, out, scratchpad, bytes);
}

}  // namespace h2::cpu
