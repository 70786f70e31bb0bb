// How a wait that cannot finish ends, so that the error the user reads names the rank that is
// really stuck. A rank that times out waiting for peer P tells every rank (P as the one blamed)
// and listens a moment for P's own report; P, blamed while it waits itself, gives up at once
// and names the peer it waits for. Along a chain of waiting ranks (a pipeline whose last stage
// hangs) each error then quotes the next rank's, ending at the one that died or hangs.
#pragma once

#include <cstdint>
#include <string>

#include "comm/transports/transport.h"

namespace h2::comm {

// Notifies every peer that this rank gives up (`blamed`: the peer it waited for, -1 when the
// failure is not a wait), and throws CommError(message); after a timeout (`blamed` >= 0) the
// message quotes the reports that follow_reports() collects.
[[noreturn]] void give_up(Transport& transport, const std::string& message, int blamed);

// The reports along the chain of waiting ranks that starts at `first`: listens up to a second
// for each rank's abort notice and follows the peer it names, until a rank sends none (it died
// or hangs), names none, or closes a cycle. "; rank 1 reports: ..." or "; the ranks it waited
// for wait too (0 -> 1 -> 2); rank 2 reports: ..."; empty when `first` sent nothing.
std::string follow_reports(Transport& transport, int first);

// A peer failure's reason, followed by the chain of reports when the failed peer gave up
// waiting for a third rank.
std::string explain_failure(Transport& transport, const PeerFailure& failure);

// Gives up a wait because the peer it waits for failed (died, or gave up itself): throws
// CommError("<what> failed: <explain_failure>") after a notice that names that peer as the one
// waited for, so that a rank waiting for this one follows the chain on through it. (Without the
// notice such a rank, timing out, found no report here and blamed this rank alone.)
[[noreturn]] void give_up_after(Transport& transport, const std::string& what,
                                const PeerFailure& failure);

// Watches one wait for blame: whether a peer gave up waiting for this rank after the wait began.
class BlameWatch {
 public:
  explicit BlameWatch(const Transport& transport)
      : transport_(transport), at_start_(transport.blame_count()) {}
  bool blamed() const { return transport_.blame_count() != at_start_; }
  // " (rank R gave up waiting for rank S, which waits here)"
  std::string explain() const;

 private:
  const Transport& transport_;
  uint64_t at_start_;
};

}  // namespace h2::comm
