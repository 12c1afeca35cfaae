#pragma once
// Which process of a data-parallel job this is, from the variables the usual launchers set:
// torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), SLURM's srun (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR/MASTER_PORT from the batch script) and OpenMPI's
// mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK). `sprintnet train --gpus N` sets torchrun's.
// Pure functions of an environment map, tested on the CPU.
#include <functional>
#include <optional>
#include <string>

namespace sprintnet::dist {

struct RankInfo {
  int rank = 0, world = 1, local_rank = 0;
  std::string master_addr;  // where rank 0 hosts NCCL's bootstrap (world > 1)
  int master_port = 0;
  std::string launcher;  // "torchrun", "slurm", "mpirun" or "single"
  bool distributed() const { return world > 1; }
  bool primary() const { return rank == 0; }
};

// Reads a variable (std::getenv in production, a map in tests); nullopt when unset.
using Environment = std::function<std::optional<std::string>(const std::string&)>;
Environment process_environment();

// The rank of this process; errors name the variable and what is wrong with it. The innermost launcher's variables
// count (torchrun's, then mpirun's, then srun's); torchrun's beside srun's or mpirun's must name the same rank of the
// same job, unless torchrun (or `train --gpus`) runs in their tasks (rank_info.cpp): else an error names both.
RankInfo rank_info_from(const Environment& env);

// A rank or a count from variable `name`: digits only, below kMaxRanks; anything else is an error naming it.
inline constexpr int kMaxRanks = 1 << 20;
int env_integer(const Environment& env, const std::string& name);
// NNODES as a count (1 when unset): `train` and the launcher must read it alike, or a process that takes "01" for
// several nodes starts a job whose one rank, reading 1 node, starts another, without end.
int node_count(const Environment& env);
// NODE_RANK as a rank (0 when unset), read as strictly as NNODES.
int node_rank(const Environment& env);

}  // namespace sprintnet::dist
