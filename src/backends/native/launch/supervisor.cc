#include "backends/native/launch/supervisor.h"

#include <fstream>

#include "backends/native/launch/rendezvous.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

std::string Describe(const RankLaunch& rank) {
  return fmt::format("rank {} (node {})", rank.rank, rank.node.empty() ? "?" : rank.node);
}

// The process of one rank, as the group runs it.
ProcessSpec RankProcess(const RankLaunch& rank, const std::string& workdir) {
  ProcessSpec spec;
  spec.argv = rank.argv;
  spec.env = rank.env;
  spec.workdir = workdir;
  spec.log_prefix = fmt::format("[rank {}] ", rank.rank);
  return spec;
}

// The reason that names the rank which ended the case, in the rank vocabulary.
std::string FailureReason(const RankLaunch& rank, const ProcessResult& end) {
  switch (end.ending) {
    case ProcessResult::Ending::kExited:
      return fmt::format("{} exited with code {}", Describe(rank), end.exit_code);
    case ProcessResult::Ending::kFailedToStart:
      return fmt::format("{} failed to start: {}", Describe(rank), end.error);
    default:
      return fmt::format("{} was killed by signal {}", Describe(rank), end.signal);
  }
}

}  // namespace

SuperviseResult Supervise(ProcessRunner& processes, const std::vector<RankLaunch>& ranks,
                          const SuperviseOptions& options, const StopFlag& stop, const RankLineCallback& on_line) {
  std::vector<ProcessSpec> children;
  for (const RankLaunch& rank : ranks) children.push_back(RankProcess(rank, options.workdir));
  GroupOptions group;
  group.log_path = options.log_path;
  group.timeout_seconds = options.timeout_seconds;
  group.kill_grace_seconds = options.kill_grace_seconds;
  group.keep_in_log = options.keep_in_log;
  // Rank 0's announced rendezvous port reaches every other rank (rendezvous.h).
  group.relay = [&ranks](size_t index, std::string_view line) { return RelayRendezvous(ranks[index].rank, line); };
  const GroupResult ended = processes.RunGroup(children, group, stop, [&](size_t index, std::string_view line) {
    if (on_line) on_line(ranks[index].rank, line);
  });

  SuperviseResult result;
  result.seconds = ended.seconds;
  for (size_t i = 0; i < ranks.size(); ++i) {
    RankEnd end;
    end.rank = ranks[i].rank;
    end.node = ranks[i].node;
    if (i < ended.children.size()) {
      const ProcessResult& child = ended.children[i];
      end.pid = child.pid;
      end.started = child.pid > 0;
      end.exit_code = child.exit_code;
      end.signal = child.signal;
    }
    result.ranks.push_back(end);
  }
  const bool named = ended.first_failed >= 0 && static_cast<size_t>(ended.first_failed) < ranks.size() &&
                     static_cast<size_t>(ended.first_failed) < ended.children.size();
  switch (ended.outcome) {
    case GroupResult::Outcome::kOk:
      result.outcome = SuperviseResult::Outcome::kOk;
      break;
    case GroupResult::Outcome::kChildFailed:
    case GroupResult::Outcome::kFailedToStart: {
      const bool started = named && ended.children[ended.first_failed].pid > 0;
      result.outcome = ended.outcome == GroupResult::Outcome::kFailedToStart || !started
                           ? SuperviseResult::Outcome::kFailedToStart
                           : SuperviseResult::Outcome::kRankFailed;
      if (named) {
        if (result.outcome == SuperviseResult::Outcome::kRankFailed) result.failed_rank = ranks[ended.first_failed].rank;
        result.reason = FailureReason(ranks[ended.first_failed], ended.children[ended.first_failed]);
      } else {
        result.reason = "the ranks could not be started";
      }
      break;
    }
    case GroupResult::Outcome::kTimedOut:
      result.outcome = SuperviseResult::Outcome::kTimedOut;
      result.reason =
          fmt::format("exceeded the case's timeout of {:g} s; every rank was stopped", options.timeout_seconds);
      break;
    case GroupResult::Outcome::kStopped:
      result.outcome = SuperviseResult::Outcome::kStopped;
      result.reason = "stopped by request; every rank was stopped";
      break;
  }
  if (!options.log_path.empty()) {
    std::ofstream log(options.log_path, std::ios::app);
    log << fmt::format("# ranks ended after {:.2f} s: {}", result.seconds,
                       result.reason.empty() ? "all exited with code 0" : result.reason)
        << '\n';
  }
  return result;
}

}  // namespace native
}  // namespace protocol
