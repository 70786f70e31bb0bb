// Fuzzes pre-tokenized data files (data.path with data.format bin or uint16;
// train/data/token_file.h): read_token_file (llm.c .bin, header + uint16/uint32 tokens),
// read_uint16_file (nanoGPT, headerless) and has_token_file_header, on the input written to a
// file in this process's scratch folder (the readers take paths only).
// Input: the file's bytes.
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h), or a file read successfully that breaks token_file.h's invariant: as many
// tokens as the header declares (as the file holds, for uint16 files), none negative.
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "train/data/token_file.h"

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2;
  static const std::string path = fuzz::scratch_dir() + "/tokens.bin";
  fuzz::write_file(path, fuzz::text(data, size));
  (void)data::has_token_file_header(path);
  try {
    const std::vector<int32_t> tokens = data::read_token_file(path);
    int32_t declared = 0;
    std::memcpy(&declared, data + 8, 4);  // the read succeeded: the header is there
    H2_FUZZ_EXPECT(
        int64_t(tokens.size()) == declared,
        std::to_string(tokens.size()) + " tokens read, " + std::to_string(declared) + " declared");
    for (int32_t t : tokens) H2_FUZZ_EXPECT(t >= 0, "token " + std::to_string(t));
  } catch (const Error& e) {
    fuzz::refused(e);
  }
  try {
    const std::vector<int32_t> tokens = data::read_uint16_file(path);
    H2_FUZZ_EXPECT(tokens.size() == size / 2, std::to_string(tokens.size()) + " tokens read from " +
                                                  std::to_string(size) + " bytes");
    for (int32_t t : tokens) H2_FUZZ_EXPECT(t >= 0 && t <= 65535, "token " + std::to_string(t));
  } catch (const Error& e) {
    fuzz::refused(e);
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
