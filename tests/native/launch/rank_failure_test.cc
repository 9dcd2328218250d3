// Why a distributed case failed (rank_failure.h): a silent rank, a rank out
// of memory (by its allocator's error, or by a SIGKILL protocol did not send),
// a dead link between nodes while every rank still beat; otherwise the
// supervisor's reason with the rank's own error.
#include <doctest/doctest.h>

#include <signal.h>

#include "backends/native/launch/rank_failure.h"

namespace protocol {
namespace native {
namespace {

// Two nodes, one rank each; both beat until the end (t = 100).
RankFailure TwoNodes() {
  RankFailure f;
  f.rank_nodes = {"n0", "n1"};
  f.last_beats = {{0, 99.6}, {1, 99.8}};
  f.ended = 100;
  f.failed_rank = 0;
  f.reason = "rank 0 (node n0) exited with code 1";
  return f;
}

}  // namespace

TEST_CASE("rank failure: a timed-out collective while every rank beat names the link between the nodes") {
  RankFailure f = TwoNodes();
  f.failed_error = "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Timed out waiting 20000ms for send operation";
  CHECK(ExplainRankFailure(f) ==
        "rank 0 (node n0) stopped hearing from its peers on n1 while every rank was still alive (each one's last "
        "heartbeat 0.4 s or less before the end): the link between n0 and n1 is down or stalled; then rank 0 (node "
        "n0) exited with code 1: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Timed out waiting 20000ms for "
        "send operation");
  // A dropped connection reads the same way.
  f.failed_error = "Connection reset by peer";
  CHECK(ExplainRankFailure(f).find("the link between n0 and n1 is down or stalled") != std::string::npos);
  // All on one node: a stuck peer, no link to blame.
  f.rank_nodes = {"n0", "n0"};
  f.failed_error = "Timed out waiting 20000ms for recv operation";
  CHECK(ExplainRankFailure(f).rfind("rank 0 (node n0) stopped hearing from its peers on its own node while every rank "
                                    "was still alive",
                                    0) == 0);
}

TEST_CASE("rank failure: a rank that cannot reach rank 0's store names the rendezvous, not a collective") {
  RankFailure f = TwoNodes();
  f.failed_rank = 1;
  f.reason = "rank 1 (node n1) exited with code 1";
  f.failed_error = "The client socket has timed out after 300s while trying to connect to (10.0.0.1, 40009).";
  CHECK(ExplainRankFailure(f) ==
        "rank 1 (node n1) could not reach the rendezvous store that rank 0 (node n0) serves: nothing listened on its "
        "port, or the network between n1 and n0 is down; then rank 1 (node n1) exited with code 1: The client socket "
        "has timed out after 300s while trying to connect to (10.0.0.1, 40009).");
}

TEST_CASE("rank failure: a silent rank comes first, whatever the failed rank said") {
  RankFailure f = TwoNodes();
  f.last_beats[1] = 78.7;  // rank 1 stopped beating 21.3 s before the end
  f.failed_error = "Timed out waiting 20000ms for send operation";
  CHECK(ExplainRankFailure(f) ==
        "rank 1 (node n1) sent no heartbeat for the last 21.3 s before the case failed (one every 1 s); then rank 0 "
        "(node n0) exited with code 1: Timed out waiting 20000ms for send operation");
}

TEST_CASE("rank failure: out of memory by the allocator's error or by a SIGKILL from outside, with the estimate") {
  RankFailure f = TwoNodes();
  f.failed_rank = 1;
  f.reason = "rank 1 (node n1) exited with code 1";
  f.failed_error = "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity)";
  f.expected_memory = "71.2 GB per GPU";
  CHECK(ExplainRankFailure(f) ==
        "rank 1 (node n1) ran out of memory; the memory estimate expected 71.2 GB per GPU; lower "
        "training.batch_size or seq_len, checkpoint more layers (checkpoint_every: 1), or spread the model over more "
        "ranks; then rank 1 (node n1) exited with code 1: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
        "79.11 GiB total capacity)");
  f.failed_error = "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
                   "to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)";
  CHECK(ExplainRankFailure(f).rfind("rank 1 (node n1) ran out of memory; ", 0) == 0);
  // Killed by SIGKILL, with no estimate: no figure is made up.
  f.failed_error.clear();
  f.failed_signal = SIGKILL;
  f.expected_memory.clear();
  f.reason = "rank 1 (node n1) was killed by signal 9";
  CHECK(ExplainRankFailure(f) ==
        "rank 1 (node n1) was killed by signal 9 (SIGKILL), which protocol did not send: most often the kernel's "
        "out-of-memory killer, when the node runs out of memory (then `dmesg` or `journalctl -k` on n1 says 'Out of "
        "memory: Killed process'); lower training.batch_size or seq_len, checkpoint more layers (checkpoint_every: "
        "1), or spread the model over more ranks");
}

TEST_CASE("rank failure: anything else keeps the supervisor's reason and the rank's own error") {
  RankFailure f = TwoNodes();
  f.failed_error = "weights: no such file";
  CHECK(ExplainRankFailure(f) == "rank 0 (node n0) exited with code 1: weights: no such file");
  f.failed_error.clear();
  CHECK(ExplainRankFailure(f) == "rank 0 (node n0) exited with code 1");
  f.failed_signal = SIGSEGV;  // not a kill from outside that memory explains
  f.reason = "rank 0 (node n0) was killed by signal 11";
  CHECK(ExplainRankFailure(f) == "rank 0 (node n0) was killed by signal 11");
}

}  // namespace native
}  // namespace protocol
