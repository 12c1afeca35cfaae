#include "sprintnet/dist/rank_info.h"

#include <cstdlib>
#include <vector>

#include "sprintnet/core/error.h"

namespace sprintnet::dist {
namespace {

// MASTER_PORT: every value that is not a port (negative, 0, past 65535 or a long, not a number) gets one message.
int master_port(const Environment& env) {
  const std::string text = env("MASTER_PORT").value_or("");
  long port = 0;
  std::size_t used = 0;
  try {
    port = std::stol(text, &used);
  } catch (const std::logic_error&) {  // not a number, or past a long: port stays 0
  }
  SN_CHECK(used == text.size() && port >= 1 && port <= 65535, "MASTER_PORT={} is not a port (1 to 65535)", text);
  return static_cast<int>(port);
}

// One launcher's variables, and the rank and world they name.
struct LauncherView {
  std::string name, rank_var, world_var, local_var;
  int rank = 0, world = 1;
};

LauncherView read_launcher(const Environment& env, LauncherView view) {
  SN_CHECK(env(view.rank_var).has_value() && env(view.world_var).has_value(), "{}: {} and {} must both be set",
           view.name, view.rank_var, view.world_var);
  view.rank = env_integer(env, view.rank_var);
  view.world = env_integer(env, view.world_var);
  return view;
}

std::string named_rank(const LauncherView& v, const std::string& more = "") {
  return fmt::format("{}={} {}={}{} ({})", v.rank_var, v.rank, v.world_var, v.world, more, v.name);
}

// torchrun's variables beside those of a launcher around it (srun's, mpirun's) come from torchrun, or `train --gpus`,
// run in that launcher's tasks, or from a stale export of RANK and WORLD_SIZE (which made every srun task train alone
// as rank 0). Started in the outer job's tasks, torchrun's ranks are its own: any number in a job of one (`srun -n 1
// sprintnet train --gpus 4`), or one torchrun agent a task, whose GROUP_WORLD_SIZE (torchrun's count of agents) is
// then the outer world, whatever order its rendezvous put the agents in. Otherwise both name the same rank of one job.
void check_torchrun_within(const Environment& env, const LauncherView& torchrun, const LauncherView& outer) {
  if (outer.world == 1) return;
  const bool agents_known = env("GROUP_WORLD_SIZE").has_value();
  const int agents = agents_known ? env_integer(env, "GROUP_WORLD_SIZE") : 0;
  if (agents_known && agents == outer.world) return;
  if (torchrun.rank == outer.rank && torchrun.world == outer.world) return;
  SN_FAIL("{} and {} name different ranks: unset the variables of the launcher that did not start this process "
          "(a RANK and WORLD_SIZE exported earlier?), or run one torchrun a task (docs/DISTRIBUTED.md)",
          named_rank(torchrun, agents_known ? fmt::format(" GROUP_WORLD_SIZE={}", agents) : ""), named_rank(outer));
}

}  // namespace

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
  const auto has = [&](const std::string& n) { return env(n).has_value(); };
  // Innermost first: torchrun (or `train --gpus`) may run in an srun or mpirun task, and mpirun's ranks run in the
  // srun step that starts its daemons, one a node (their SLURM_PROCID names the node, not the rank: not compared).
  std::vector<LauncherView> found;
  if (has("RANK") || has("WORLD_SIZE")) {
    found.push_back(read_launcher(env, {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"}));
  }
  if (has("OMPI_COMM_WORLD_RANK") || has("OMPI_COMM_WORLD_SIZE")) {
    found.push_back(read_launcher(
        env, {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}));
  }
  if (has("SLURM_PROCID") && has("SLURM_STEP_ID")) {
    // A task srun started. An sbatch script's own shell has SLURM_PROCID=0 and the job's SLURM_NTASKS too, but no
    // SLURM_STEP_ID (srun's steps alone set it): a command run there is one process, not rank 0 of the job's tasks.
    // The step's task count, not the allocation's (srun --preserve-env keeps the latter in SLURM_NTASKS).
    const char* world = has("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    found.push_back(read_launcher(env, {"slurm", "SLURM_PROCID", world, "SLURM_LOCALID"}));
  }
  RankInfo info;
  if (found.empty()) {
    info.launcher = "single";
    return info;
  }
  const LauncherView& used = found.front();
  if (used.name == "torchrun" && found.size() > 1) check_torchrun_within(env, used, found[1]);
  info.launcher = used.name;
  info.rank = used.rank;
  info.world = used.world;
  info.local_rank = has(used.local_var) ? env_integer(env, used.local_var) : info.rank;
  SN_CHECK(info.world >= 1, "{}={}: a job has at least one rank", used.world_var, info.world);
  SN_CHECK(info.rank < info.world, "{}={} is not below {}={}", used.rank_var, info.rank, used.world_var, info.world);
  if (info.world > 1) {
    SN_CHECK(has("MASTER_ADDR") && has("MASTER_PORT"),
             "rank {} of {} ({}): MASTER_ADDR and MASTER_PORT must name rank 0's host and a free port", info.rank,
             info.world, info.launcher);
    info.master_addr = env("MASTER_ADDR").value_or("");
    SN_CHECK(!info.master_addr.empty(), "MASTER_ADDR is empty");
    info.master_port = master_port(env);
  }
  return info;
}

}  // namespace sprintnet::dist
