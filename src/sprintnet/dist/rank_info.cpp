#include "sprintnet/dist/rank_info.h"

#include <cstdlib>

#include "sprintnet/core/error.h"

namespace sprintnet::dist {

int env_integer(const Environment& env, const std::string& name) {
  const std::string text = env(name).value_or("");
  try {
    std::size_t used = 0;
    const long v = std::stol(text, &used);
    SN_CHECK(used == text.size() && v >= 0 && v < kMaxRanks, "{}='{}' is not a rank or a count (0 to {})", name, text,
             kMaxRanks - 1);
    return static_cast<int>(v);
  } catch (const std::out_of_range&) {
    SN_FAIL("{}='{}' is not a rank or a count (0 to {})", name, text, kMaxRanks - 1);
  } catch (const std::logic_error&) {
    SN_FAIL("{}='{}' is not an integer", name, text);
  }
}

int node_count(const Environment& env) { return env("NNODES") ? env_integer(env, "NNODES") : 1; }

int node_rank(const Environment& env) { return env("NODE_RANK") ? env_integer(env, "NODE_RANK") : 0; }

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
  };
}

RankInfo rank_info_from(const Environment& env) {
  RankInfo info;
  const auto has = [&](const std::string& n) { return env(n).has_value(); };
  std::string rank_var, world_var, local_var;
  if (has("RANK") || has("WORLD_SIZE")) {
    info.launcher = "torchrun";
    rank_var = "RANK", world_var = "WORLD_SIZE", local_var = "LOCAL_RANK";
  } else if (has("OMPI_COMM_WORLD_RANK")) {
    info.launcher = "mpirun";
    rank_var = "OMPI_COMM_WORLD_RANK", world_var = "OMPI_COMM_WORLD_SIZE", local_var = "OMPI_COMM_WORLD_LOCAL_RANK";
  } else if (has("SLURM_PROCID") && has("SLURM_STEP_ID")) {
    // A task srun started. An sbatch script's own shell has SLURM_PROCID=0 and the job's SLURM_NTASKS too, but no
    // SLURM_STEP_ID (srun's steps alone set it): a command run there is one process, not rank 0 of the job's tasks.
    // The step's task count, not the allocation's (srun --preserve-env keeps the latter in SLURM_NTASKS).
    info.launcher = "slurm";
    rank_var = "SLURM_PROCID", local_var = "SLURM_LOCALID";
    world_var = has("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  } else {
    info.launcher = "single";
    return info;
  }
  SN_CHECK(has(rank_var) && has(world_var), "{}: {} and {} must both be set", info.launcher, rank_var, world_var);
  info.rank = env_integer(env, rank_var);
  info.world = env_integer(env, world_var);
  info.local_rank = has(local_var) ? env_integer(env, local_var) : info.rank;
  SN_CHECK(info.world >= 1, "{}={}: a job has at least one rank", world_var, info.world);
  SN_CHECK(info.rank < info.world, "{}={} is not below {}={}", rank_var, info.rank, world_var, info.world);
  if (info.world > 1) {
    SN_CHECK(has("MASTER_ADDR") && has("MASTER_PORT"),
             "rank {} of {} ({}): MASTER_ADDR and MASTER_PORT must name rank 0's host and a free port", info.rank,
             info.world, info.launcher);
    info.master_addr = env("MASTER_ADDR").value_or("");
    SN_CHECK(!info.master_addr.empty(), "MASTER_ADDR is empty");
    info.master_port = env_integer(env, "MASTER_PORT");
    SN_CHECK(info.master_port > 0 && info.master_port < 65536, "MASTER_PORT={} is not a port", info.master_port);
  }
  return info;
}

}  // namespace sprintnet::dist
