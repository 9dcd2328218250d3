#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_SLURM_ENV_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_SLURM_ENV_H_

// Where a process started by srun sits in its job: rank, world size, local
// rank and the master node, read from the SLURM_* variables srun sets
// (the `slurm` launcher, docs/distributed.md). Pure functions of an environment map,
// so they are tested on fixed maps; CurrentEnvironment() supplies the real one.

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runner/base/status.h"
#include "runner/exec/process.h"

namespace protocol {

using EnvironmentMap = std::map<std::string, std::string>;

struct SlurmRank {
  int rank = 0;             // SLURM_PROCID: 0 .. world-1
  int world = 1;            // SLURM_NTASKS (else SLURM_NPROCS)
  int local_rank = 0;       // SLURM_LOCALID: index among this node's tasks
  int node_rank = 0;        // SLURM_NODEID: index of this node in the job (0 when unset)
  std::vector<std::string> hosts;  // SLURM_JOB_NODELIST (else SLURM_NODELIST), expanded
  std::string master;       // hosts[0]: where rank 0 and the TCPStore run
  std::string job_id;       // SLURM_JOB_ID (else SLURM_JOBID); "" when unset
};

// Expands a Slurm hostlist ("rig[0-2,5],gpu-a" -> rig0 rig1 rig2 rig5 gpu-a),
// keeping zero padding ("n[08-10]" -> n08 n09 n10) and several bracket groups
// in one name ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). InvalidArgument on
// unbalanced brackets, bad ranges, or more than 65536 hosts.
Result<std::vector<std::string>> ExpandHostlist(std::string_view hostlist);

// Expands with `scontrol show hostnames <hostlist>` instead (Slurm's own
// parser, for syntax ExpandHostlist does not know). `runner` not owned.
Result<std::vector<std::string>> ExpandHostlistWithScontrol(ProcessRunner& runner, std::string_view hostlist);

using HostlistExpander = std::function<Result<std::vector<std::string>>(std::string_view)>;

// Reads the rank from `env`. InvalidArgument naming the variable when one is
// missing (SLURM_PROCID, SLURM_NTASKS/SLURM_NPROCS, SLURM_LOCALID,
// SLURM_JOB_NODELIST/SLURM_NODELIST) or malformed, or when the values
// contradict each other (rank >= world). `expand` defaults to ExpandHostlist.
Result<SlurmRank> ReadSlurmRank(const EnvironmentMap& env, const HostlistExpander& expand = nullptr);

// This process's environment as a map.
EnvironmentMap CurrentEnvironment();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_SLURM_ENV_H_
