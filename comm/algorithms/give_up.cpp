// Giving up a wait: the abort notice, the blamed peer's report, the message (see give_up.h).
#include "comm/algorithms/give_up.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "comm/comm_error.h"

namespace h2::comm {
namespace {

// How long a rank that timed out listens for the report of the peer it waited for: that peer
// gives up as soon as it sees the blame (a few polls) and its notice takes a fraction of this.
constexpr auto kReportGrace = std::chrono::milliseconds(1000);

}  // namespace

std::string follow_reports(Transport& transport, int first) {
  std::vector<int> chain = {transport.rank()};
  std::optional<AbortNotice> last;
  int next = first;
  auto until = std::chrono::steady_clock::now() + kReportGrace;
  while (std::chrono::steady_clock::now() < until) {
    transport.progress();
    std::optional<AbortNotice> report = transport.notice_from(next);
    if (!report) continue;
    chain.push_back(next);
    const int blamed = report->blamed;  // (read before the move: GCC 12 took last's for unset)
    last = std::move(report);
    if (blamed < 0 || std::find(chain.begin(), chain.end(), blamed) != chain.end()) break;
    next = blamed;
    until = std::chrono::steady_clock::now() + kReportGrace;
  }
  if (!last) return "";
  if (chain.size() == 2) return fmt::format("; rank {} reports: {}", chain[1], last->reason);
  return fmt::format("; the ranks it waited for wait too ({}); rank {} reports: {}",
                     fmt::join(chain, " -> "), chain.back(), last->reason);
}

void give_up(Transport& transport, const std::string& message, int blamed) {
  transport.notify_abort(message, blamed);
  if (blamed < 0) throw CommError(message);
  throw CommError(message + follow_reports(transport, blamed));
}

std::string explain_failure(Transport& transport, const PeerFailure& failure) {
  std::optional<AbortNotice> notice = transport.notice_from(failure.rank);
  if (!notice || notice->blamed < 0 || notice->blamed == transport.rank()) return failure.reason;
  return failure.reason + follow_reports(transport, notice->blamed);
}

void give_up_after(Transport& transport, const std::string& what, const PeerFailure& failure) {
  const std::string message =
      fmt::format("{} failed: {}", what, explain_failure(transport, failure));
  transport.notify_abort(message, failure.rank);
  throw CommError(message);
}

std::string BlameWatch::explain() const {
  return fmt::format("rank {} gave up waiting for rank {}, which waits here",
                     transport_.last_blamer(), transport_.rank());
}

}  // namespace h2::comm
