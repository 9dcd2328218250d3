#include "backends/native/launch/rank_failure.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "backends/native/launch/events.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool ContainsAny(const std::string& text, std::initializer_list<const char*> needles) {
  const std::string lower = Lower(text);
  for (const char* n : needles)
    if (lower.find(n) != std::string::npos) return true;
  return false;
}

std::string NodeOf(const std::vector<std::string>& rank_nodes, int rank) {
  return rank >= 0 && static_cast<size_t>(rank) < rank_nodes.size() ? rank_nodes[static_cast<size_t>(rank)] : "?";
}

std::string Rank(const std::vector<std::string>& rank_nodes, int rank) {
  return fmt::format("rank {} (node {})", rank, NodeOf(rank_nodes, rank));
}

// The supervisor's reason with the rank's own error after it.
std::string WithError(const RankFailure& f) {
  return f.failed_error.empty() ? f.reason : f.reason + ": " + f.failed_error;
}

std::string MemoryHint(const RankFailure& f) {
  const std::string expected =
      f.expected_memory.empty() ? "" : fmt::format("; the memory estimate expected {}", f.expected_memory);
  return expected +
         "; lower training.batch_size or seq_len, checkpoint more layers (checkpoint_every: 1), or spread the model "
         "over more ranks";
}

}  // namespace

bool IsOutOfMemoryError(const std::string& error) {
  return ContainsAny(error, {"out of memory", "can't allocate memory", "cannot allocate memory", "std::bad_alloc",
                             "outofmemoryerror"});
}

bool IsLostPeerError(const std::string& error) {
  return ContainsAny(error, {"timed out", "timeout", "connection reset", "connection closed", "broken pipe",
                             "connection refused", "end of file", "socket closed"});
}

std::string SilentRank(const std::vector<std::string>& rank_nodes, const std::map<int, double>& last_beats,
                       double ended) {
  int silent = -1;
  double oldest = ended - kSilentHeartbeats * kHeartbeatSeconds;
  for (const auto& [rank, beat] : last_beats)
    if (beat < oldest) {
      oldest = beat;
      silent = rank;
    }
  if (silent < 0) return "";
  return fmt::format("{} sent no heartbeat for the last {:.1f} s before the case failed (one every {:g} s)",
                     Rank(rank_nodes, silent), ended - oldest, kHeartbeatSeconds);
}

std::string ExplainRankFailure(const RankFailure& f) {
  if (std::string silent = SilentRank(f.rank_nodes, f.last_beats, f.ended); !silent.empty())
    return silent + "; then " + WithError(f);
  if (f.failed_rank < 0) return f.reason;
  const std::string who = Rank(f.rank_nodes, f.failed_rank);
  if (IsOutOfMemoryError(f.failed_error)) return who + " ran out of memory" + MemoryHint(f) + "; then " + WithError(f);
  // The supervisor signals ranks only after the case failed: a SIGKILL that
  // ended the first failed rank came from elsewhere, most often the kernel.
  if (f.failed_signal == SIGKILL)
    return fmt::format("{} was killed by signal 9 (SIGKILL), which protocol did not send: most often the kernel's "
                       "out-of-memory killer, when the node runs out of memory (then `dmesg` or `journalctl -k` on {} "
                       "says 'Out of memory: Killed process'){}",
                       who, NodeOf(f.rank_nodes, f.failed_rank), MemoryHint(f));
  // The store's client could not connect: the rendezvous, not a collective.
  if (f.failed_rank != 0 && ContainsAny(f.failed_error, {"trying to connect to"}))
    return fmt::format("{} could not reach the rendezvous store that {} serves: nothing listened on its port, or "
                       "the network between {} and {} is down; then {}",
                       who, Rank(f.rank_nodes, 0), NodeOf(f.rank_nodes, f.failed_rank), NodeOf(f.rank_nodes, 0),
                       WithError(f));
  if (IsLostPeerError(f.failed_error) && !f.last_beats.empty()) {
    // Every rank still beat (no silent one): the processes lived, the communication between them did not.
    double stalest = 0;
    for (const auto& [rank, beat] : f.last_beats) stalest = std::max(stalest, f.ended - beat);
    const std::string here = NodeOf(f.rank_nodes, f.failed_rank);
    std::set<std::string> others;
    for (const std::string& node : f.rank_nodes)
      if (node != here) others.insert(node);
    const std::string alive = fmt::format("every rank was still alive (each one's last heartbeat {:.1f} s or less "
                                          "before the end)",
                                          stalest);
    if (others.empty())
      return fmt::format("{} stopped hearing from its peers on its own node while {}: a peer is stuck in another "
                         "collective, not dead; then {}",
                         who, alive, WithError(f));
    std::vector<std::string> links;
    for (const std::string& other : others) links.push_back(here + " and " + other);
    return fmt::format("{} stopped hearing from its peers on {} while {}: the link between {} is down or stalled; "
                       "then {}",
                       who, Join(std::vector<std::string>(others.begin(), others.end()), ", "), alive,
                       Join(links, ", between "), WithError(f));
  }
  return WithError(f);
}

}  // namespace native
}  // namespace protocol
