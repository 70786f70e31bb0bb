// Fuzzes the rendezvous store's wire format as the store server reads a connection
// (comm/bootstrap/store_protocol.h): the first frame under the HELLO limit (kMaxHelloBytes), the
// following frames under kMaxFrameBytes, each through decode_frame (decode_length, decode_body).
// Every decoded frame must encode back to the same bytes and carry the strings its op needs (the
// server indexes them without checking).
// Input: the bytes a peer sends on one connection.
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h), or a decoded frame that does not encode back to its bytes.
#include <string>
#include <string_view>

#include "comm/bootstrap/store_protocol.h"
#include "core/error.h"
#include "fuzz/fuzz_common.h"

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2::comm;
  std::string_view bytes = h2::fuzz::text(data, size);
  uint32_t limit = store_proto::kMaxHelloBytes;
  while (true) {
    size_t consumed = 0;
    std::optional<store_proto::Message> m;
    try {
      m = store_proto::decode_frame(bytes, &consumed, limit);
    } catch (const h2::Error& e) {
      return h2::fuzz::refused(e);
    }
    if (!m) return 0;  // incomplete: the server would wait for more bytes
    // Outside the try: encode's h2::Error (a message whose shape does not fit its op) is a finding.
    const std::string_view frame = bytes.substr(0, consumed);
    H2_FUZZ_EXPECT(store_proto::encode(*m) == frame,
                   "a " + store_proto::op_name(m->op) + " frame does not encode back");
    H2_FUZZ_EXPECT(store_proto::decode_body(frame.substr(store_proto::kHeaderBytes)) == *m,
                   "decode_body differs from decode_frame");
    if (m->op == store_proto::Op::kHello)
      (void)store_proto::tokens_equal(m->strings.at(0), "job-token");
    bytes.remove_prefix(consumed);
    limit = store_proto::kMaxFrameBytes;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
