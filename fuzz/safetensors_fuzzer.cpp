// Fuzzes safetensors files (checkpoint shards, Hugging Face weights; train/checkpoint/
// safetensors.h): decode_safetensors of the bytes, which read_safetensors calls on a file's
// contents. Checks what a decoded file promises: every tensor holds exactly the bytes of its dtype
// and shape.
// Input: the file's bytes (8-byte little-endian header length, JSON header, data).
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h), or a decoded tensor of the wrong byte size.
#include <span>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "train/checkpoint/safetensors.h"

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2;
  checkpoint::TensorMap tensors;
  try {
    tensors = checkpoint::decode_safetensors(std::as_bytes(std::span<const uint8_t>(data, size)),
                                             "fuzz.safetensors");
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  for (const auto& [name, t] : tensors)
    H2_FUZZ_EXPECT(int64_t(t.bytes.size()) == dtype_storage_bytes(t.dtype, t.shape.numel()),
                   "tensor '" + name + "' " + t.shape.str() + " holds " +
                       std::to_string(t.bytes.size()) + " bytes");
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
