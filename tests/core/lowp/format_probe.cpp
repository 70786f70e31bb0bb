// format_probe: the low-precision format conversions as a file filter, for comparisons with other
// implementations (tests/python/check_ml_dtypes.py).
//   format_probe encode FORMAT OVERFLOW PATH BATCH IN.f32 OUT.u8
//       IN: raw little-endian FP32; OUT: one code byte per element (E2M1 codes unpacked).
//       OVERFLOW: saturate | standard; PATH: scalar (encode) | batch (encode_n; not for e8m0).
//   format_probe decode FORMAT OUT.f32
//       OUT: the decode table, 256 FP32 values (code order).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/lowp/formats.h"

namespace {

using h2::lowp::Format;
using h2::lowp::Overflow;

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  H2_CHECK(in.good(), "cannot read {}", path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  H2_CHECK(out.good(), "cannot write {}", path);
}

Overflow parse_overflow(const std::string& text) {
  if (text == "saturate") return Overflow::saturate;
  if (text == "standard") return Overflow::standard;
  H2_THROW(h2::ConfigError, "overflow must be saturate or standard, not '{}'", text);
}

std::vector<uint8_t> encode_scalar(Format f, const std::vector<float>& x, Overflow overflow) {
  std::vector<uint8_t> codes(x.size());
  for (size_t i = 0; i < x.size(); ++i) codes[i] = h2::lowp::encode(f, x[i], overflow);
  return codes;
}

std::vector<uint8_t> encode_batch(Format f, const std::vector<float>& x, Overflow overflow) {
  const int64_t n = static_cast<int64_t>(x.size());
  const bool packed = f == Format::e2m1;
  std::vector<uint8_t> out(packed ? (x.size() + 1) / 2 : x.size());
  h2::lowp::encode_n(f, x.data(), n, 1.0f, out.data(), overflow);
  if (!packed) return out;
  std::vector<uint8_t> codes(x.size());
  for (size_t i = 0; i < x.size(); ++i) codes[i] = (out[i / 2] >> ((i & 1) * 4)) & 0xf;
  return codes;
}

int run(const std::vector<std::string>& args) {
  if (args.size() == 3 && args[0] == "decode") {
    write_file(args[2], h2::lowp::decode_table(h2::lowp::parse_format(args[1])),
               256 * sizeof(float));
    return 0;
  }
  if (args.size() == 6 && args[0] == "encode") {
    const Format f = h2::lowp::parse_format(args[1]);
    const Overflow overflow = parse_overflow(args[2]);
    const std::vector<char> bytes = read_file(args[4]);
    std::vector<float> x(bytes.size() / sizeof(float));
    std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(x.size() * sizeof(float)),
              reinterpret_cast<char*>(x.data()));
    const std::vector<uint8_t> codes =
        args[3] == "batch" ? encode_batch(f, x, overflow) : encode_scalar(f, x, overflow);
    write_file(args[5], codes.data(), codes.size());
    return 0;
  }
  std::fprintf(stderr,
               "usage: format_probe encode FORMAT saturate|standard scalar|batch IN.f32 OUT.u8\n"
               "       format_probe decode FORMAT OUT.f32\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const h2::Error& e) {
    std::fprintf(stderr, "format_probe: %s\n", e.what());
    return 1;
  }
}
