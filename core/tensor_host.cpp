// Host <-> device value helpers (see tensor_host.h).
#include "core/tensor_host.h"

#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/half_float.h"
#include "core/lowp/formats.h"
#include "core/lowp/quant_spec.h"

namespace h2 {
namespace {

// Code of element i of a packed or byte-per-element code buffer.
uint8_t load_code(const void* base, DType dtype, int64_t i) {
  const uint8_t* bytes = static_cast<const uint8_t*>(base);
  if (dtype != DType::f4e2m1) return bytes[i];
  return uint8_t(i % 2 == 0 ? bytes[i / 2] & 0x0f : bytes[i / 2] >> 4);
}

void store_code(void* base, DType dtype, int64_t i, uint8_t code) {
  uint8_t* bytes = static_cast<uint8_t*>(base);
  if (dtype != DType::f4e2m1) {
    bytes[i] = code;
  } else if (i % 2 == 0) {
    bytes[i / 2] = uint8_t((bytes[i / 2] & 0xf0) | (code & 0x0f));
  } else {
    bytes[i / 2] = uint8_t((bytes[i / 2] & 0x0f) | (code << 4));
  }
}

void upload(const Tensor& dst, const void* host, size_t bytes) {
  dst.device().copy_bytes(dst.data(), true, host, false, bytes, dst.device().default_stream());
}

std::vector<std::byte> download(const Tensor& tensor) {
  Tensor src = tensor.contiguous();
  std::vector<std::byte> bytes(size_t(src.nbytes()));
  src.device().copy_bytes(bytes.data(), false, src.data(), true, bytes.size(),
                          src.device().default_stream());
  return bytes;
}

}  // namespace

Tensor tensor_from_floats(std::span<const float> values, const Shape& shape, DType dtype,
                          Device& device) {
  H2_CHECK(int64_t(values.size()) == shape.numel(), "{} values for shape {}", values.size(),
           shape.str());
  Tensor t = Tensor::empty(shape, dtype, device);
  switch (dtype) {
    case DType::f32:
      upload(t, values.data(), values.size_bytes());
      break;
    case DType::bf16:
    case DType::f16: {
      std::vector<uint16_t> encoded(values.size());
      for (size_t i = 0; i < values.size(); ++i)
        encoded[i] = dtype == DType::bf16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      upload(t, encoded.data(), encoded.size() * 2);
      break;
    }
    default: {  // FP8/FP4 codes, saturating, ties to even
      const std::optional<lowp::Format> f = lowp::element_format(dtype);
      if (!f) H2_THROW(UnsupportedError, "tensor_from_floats to {}", dtype_name(dtype));
      std::vector<uint8_t> codes(size_t(t.nbytes()));
      lowp::encode_n(*f, values.data(), int64_t(values.size()), 1.0f, codes.data());
      upload(t, codes.data(), codes.size());
    }
  }
  return t;
}

Tensor tensor_from_ints(std::span<const int64_t> values, const Shape& shape, DType dtype,
                        Device& device) {
  H2_CHECK(int64_t(values.size()) == shape.numel(), "{} values for shape {}", values.size(),
           shape.str());
  Tensor t = Tensor::empty(shape, dtype, device);
  if (dtype == DType::i64) {
    upload(t, values.data(), values.size_bytes());
  } else if (dtype == DType::i32) {
    std::vector<int32_t> narrow(values.begin(), values.end());
    upload(t, narrow.data(), narrow.size() * 4);
  } else {
    H2_THROW(UnsupportedError, "tensor_from_ints to {}", dtype_name(dtype));
  }
  return t;
}

std::vector<float> tensor_to_floats(const Tensor& tensor) {
  std::vector<std::byte> bytes = download(tensor);
  std::vector<float> values(size_t(tensor.numel()));
  switch (tensor.dtype()) {
    case DType::f32:  // no copy of nothing: memcpy's pointers must not be null, even for 0 bytes
      if (!bytes.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
      break;
    case DType::bf16:
    case DType::f16:
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + 2 * i, 2);
        values[i] = tensor.dtype() == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      }
      break;
    default: {
      const std::optional<lowp::Format> f = lowp::element_format(tensor.dtype());
      if (!f) H2_THROW(UnsupportedError, "tensor_to_floats of {}", tensor.str());
      lowp::decode_n(*f, reinterpret_cast<const uint8_t*>(bytes.data()), int64_t(values.size()),
                     1.0f, values.data());
    }
  }
  return values;
}

std::vector<int64_t> tensor_to_ints(const Tensor& tensor) {
  std::vector<std::byte> bytes = download(tensor);
  std::vector<int64_t> values(size_t(tensor.numel()));
  if (tensor.dtype() == DType::i64) {
    std::memcpy(values.data(), bytes.data(), bytes.size());
  } else if (tensor.dtype() == DType::i32) {
    for (size_t i = 0; i < values.size(); ++i) {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      values[i] = v;
    }
  } else {
    H2_THROW(UnsupportedError, "tensor_to_ints of {}", tensor.str());
  }
  return values;
}

void store_host_element(void* base, DType dtype, int64_t i, double value) {
  switch (dtype) {
    case DType::f32:
      static_cast<float*>(base)[i] = float(value);
      return;
    case DType::bf16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(float(value));
      return;
    case DType::f16:
      static_cast<uint16_t*>(base)[i] = f32_to_f16(float(value));
      return;
    case DType::i32:
      static_cast<int32_t*>(base)[i] = int32_t(value);
      return;
    case DType::i64:
      static_cast<int64_t*>(base)[i] = int64_t(value);
      return;
    case DType::u8:
      static_cast<uint8_t*>(base)[i] = uint8_t(value);
      return;
    case DType::f8e4m3:
    case DType::f8e5m2:
    case DType::f4e2m1:
      store_code(base, dtype, i, lowp::encode(*lowp::element_format(dtype), float(value)));
      return;
    default:
      H2_THROW(UnsupportedError, "no host element access for {}", dtype_name(dtype));
  }
}

double load_host_element(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::i32:
      return static_cast<const int32_t*>(base)[i];
    case DType::i64:
      return double(static_cast<const int64_t*>(base)[i]);
    case DType::u8:
      return static_cast<const uint8_t*>(base)[i];
    case DType::f8e4m3:
    case DType::f8e5m2:
    case DType::f4e2m1:
      return lowp::decode(*lowp::element_format(dtype), load_code(base, dtype, i));
    default:
      H2_THROW(UnsupportedError, "no host element access for {}", dtype_name(dtype));
  }
}

}  // namespace h2
