#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_RANK_FAILURE_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_RANK_FAILURE_H_

// Why a distributed case failed, in the words an operator on the rigs needs
// (docs/runner.md, "Faults"), from what the runner saw: which rank ended the
// case and how (supervisor.h), each rank's own error event, and when each
// rank's last heartbeat came (events.h). The failed rank's own words are
// always kept after the finding.
//
//   a silent rank    a rank's heartbeats stopped kSilentHeartbeats beats or
//                    more before the end (stopped, hung, or its node gone):
//                    named first, whatever else failed after it;
//   out of memory    the failed rank's error is an allocator's (CUDA out of
//                    memory, the CPU allocator, std::bad_alloc), or a SIGKILL
//                    that protocol did not send ended it (what the kernel's
//                    out-of-memory killer sends): the rank, the signal, and
//                    the case's memory estimate where there is one;
//   no rendezvous    a rank's store client could not connect to rank 0's store;
//   a dead link      the failed rank's error is a collective's time-out or a
//                    dropped connection while every rank still beat: the
//                    nodes whose link is down, and how fresh each beat was.

#include <map>
#include <string>
#include <vector>

namespace protocol {
namespace native {

struct RankFailure {
  std::vector<std::string> rank_nodes;  // the node of each rank (DistLayout::rank_nodes)
  std::map<int, double> last_beats;     // rank → when its last heartbeat came (steady seconds)
  double ended = 0;                     // when the case ended (steady seconds)
  int failed_rank = -1;                 // the rank that ended the case; -1: none (time-out, stop)
  int failed_signal = 0;                // the signal that ended it (0: it exited)
  std::string failed_error;             // its own error event ("" when it sent none)
  std::string reason;                   // the supervisor's: "rank 1 (node n0) exited with code 1"
  std::string expected_memory;          // "71.2 GB per GPU" from the memory estimate; "" when unknown
};

// The case's reason: the finding first ("rank 1 (node n1) ran out of
// memory ...; then rank 1 (node n1) exited with code 1: <its error>"), or the
// supervisor's reason with the rank's error when nothing more is known.
std::string ExplainRankFailure(const RankFailure& f);

// "rank 1 (node n0) sent no heartbeat for the last 21.3 s before the case
// failed (one every 1 s)" for the rank whose beats stopped first, when they
// stopped kSilentHeartbeats beats or more before `ended`; "" otherwise.
std::string SilentRank(const std::vector<std::string>& rank_nodes, const std::map<int, double>& last_beats,
                       double ended);

// Whether `error` reads as out of memory / as a lost peer in a collective.
bool IsOutOfMemoryError(const std::string& error);
bool IsLostPeerError(const std::string& error);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_RANK_FAILURE_H_
