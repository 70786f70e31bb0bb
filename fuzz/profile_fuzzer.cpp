// Fuzzes chip profiles (the JSON files `h2 profile` writes into parallel.profiles and HeteroAuto
// reads back; parallel/planner/profile.h): profile_from_json of the text, then what the planner
// asks of a profile: the cost of each unit kind at several micro-batch sizes (measured,
// interpolated or extrapolated). An accepted profile must also survive to_json and read back to
// the same JSON.
// Input: the profile's JSON text.
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h), or an accepted profile whose JSON form reads back differently.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "parallel/planner/profile.h"

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2::parallel::planner;
  ChipProfile profile;
  try {
    profile = profile_from_json(std::string(h2::fuzz::text(data, size)), "fuzz-profile.json");
  } catch (const h2::Error& e) {
    return h2::fuzz::refused(e);
  }
  const std::string text = to_json(profile);
  std::string again;
  try {
    again = to_json(profile_from_json(text, "to_json"));
  } catch (const h2::Error& e) {
    H2_FUZZ_EXPECT(false, std::string("the written profile does not parse: ") + e.what());
  }
  H2_FUZZ_EXPECT(again == text, "the written profile reads back differently:\n" + text);
  (void)profile.key.difference(profile.key);
  for (int k = 0; k < kUnitKinds; ++k)
    for (int64_t rows : {int64_t(1), int64_t(2), int64_t(3), int64_t(7), int64_t(1000)}) {
      try {
        (void)profile.cost(UnitKind(k), rows);
      } catch (const h2::Error& e) {
        h2::fuzz::refused(e);
      }
    }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
