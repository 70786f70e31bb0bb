// Fuzzes checkpoint manifests (manifest.json of a checkpoint folder, read on resume and by
// resharding reads; train/checkpoint/manifest.h): manifest_from_json of the text. A manifest it
// accepts must survive manifest_to_json and read back equal (rank 0 writes what readers parse).
// Input: the manifest's JSON text.
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h), or an accepted manifest whose JSON form reads back differently.
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "train/checkpoint/manifest.h"

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2;
  checkpoint::Manifest manifest;
  try {
    manifest = checkpoint::manifest_from_json(std::string(fuzz::text(data, size)), "fuzz.json");
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  const std::string text = checkpoint::manifest_to_json(manifest);
  checkpoint::Manifest back;
  try {
    back = checkpoint::manifest_from_json(text, "manifest_to_json");
  } catch (const Error& e) {
    H2_FUZZ_EXPECT(false, std::string("the written manifest does not parse: ") + e.what());
  }
  H2_FUZZ_EXPECT(back == manifest, "the written manifest reads back differently:\n" + text);
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
