// Fuzzes chip files (H2_VCHIP_CONFIG, configs/chips/*.yaml; backends/vchip/chip_spec.h):
// parse_chip_specs of the text (sizes such as "memory: 2GiB" through parse_bytes), then each
// spec's peak lookups.
// Input: the chip file's YAML text.
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h).
#include <string>

#include "backends/vchip/chip_spec.h"
#include "core/error.h"
#include "fuzz/fuzz_common.h"

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2;
  const std::string text(fuzz::text(data, size));
  try {
    for (const ChipSpec& chip : vchip::parse_chip_specs(text, "fuzz-chips.yaml"))
      for (int t = 0; t < kDTypeCount; ++t) (void)chip.peak(DType(t));
  } catch (const Error& e) {
    fuzz::refused(e);
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
