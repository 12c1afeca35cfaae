// Which rank a process is, from torchrun's, SLURM's and OpenMPI's variables, and the errors that
// name the variable when they are wrong: pure functions of an environment, tested without GPUs. And the
// launcher's own checks and the environment it gives its ranks (shells standing in for them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <vector>

#include "sprintnet/dist/launcher.h"
#include "sprintnet/dist/rank_info.h"
#include "sprintnet/io/read_file.h"
#include "support/error_message.h"
#include "support/fake_environment.h"
#include "support/scoped_env.h"
#include "support/test_util.h"

namespace sprintnet::dist {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto* env = &test::fake_environment;  // env({{"RANK", "1"}, ...}): variables from a map

TEST(RankInfo, NoLauncherIsOneRank) {
  const RankInfo info = rank_info_from(env({}));
  EXPECT_EQ(info.world, 1);
  EXPECT_FALSE(info.distributed());
  EXPECT_TRUE(info.primary());
  EXPECT_EQ(info.launcher, "single");
}

TEST(RankInfo, EachLaunchersVariablesAreRead) {
  const std::map<std::string, std::string> master = {{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](std::map<std::string, std::string> vars) {
    vars.insert(master.begin(), master.end());
    return rank_info_from(env(vars));
  };
  const RankInfo torchrun = with({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(torchrun.launcher, "torchrun");
  EXPECT_EQ(torchrun.rank, 3);
  EXPECT_EQ(torchrun.world, 4);
  EXPECT_EQ(torchrun.local_rank, 1);
  EXPECT_EQ(torchrun.master_addr, "10.0.0.1");
  EXPECT_EQ(torchrun.master_port, 29500);
  const RankInfo slurm = with({{"SLURM_PROCID", "5"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "8"},
                                {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.world, 8) << "the step's tasks (srun -n 8 --preserve-env in a 16-task job)";
  EXPECT_EQ(slurm.local_rank, 1);
  EXPECT_EQ(with({{"SLURM_PROCID", "1"}, {"SLURM_STEP_ID", "3"}, {"SLURM_NTASKS", "2"}}).world, 2);
  // An sbatch script's own shell: SLURM_PROCID=0 and the job's SLURM_NTASKS, no step. One process, not rank 0 of 8.
  const RankInfo batch_shell = with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(batch_shell.launcher, "single");
  EXPECT_EQ(batch_shell.world, 1);
  const RankInfo mpi = with({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_EQ(mpi.launcher, "mpirun");
  EXPECT_EQ(mpi.rank, 2);
  EXPECT_FALSE(mpi.primary());
}

TEST(RankInfo, WrongValuesAreNamed) {
  EXPECT_THAT(test::error_message([] { rank_info_from(env({{"RANK", "4"}, {"WORLD_SIZE", "4"}})); }),
              HasSubstr("RANK=4 is not below WORLD_SIZE=4"));
  EXPECT_THAT(test::error_message([] { rank_info_from(env({{"RANK", "0"}, {"WORLD_SIZE", "two"}})); }),
              HasSubstr("WORLD_SIZE='two'"));
  EXPECT_THAT(test::error_message([] { rank_info_from(env({{"RANK", "0"}, {"WORLD_SIZE", "2"}})); }),
              HasSubstr("MASTER_ADDR and MASTER_PORT"));
  EXPECT_THAT(test::error_message([] {
                rank_info_from(env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "0"}}));
              }),
              HasSubstr("MASTER_PORT=0 is not a port"));
  EXPECT_THAT(test::error_message([] { rank_info_from(env({{"WORLD_SIZE", "2"}})); }),
              HasSubstr("RANK and WORLD_SIZE must both be set"));
}

// A RANK=0 WORLD_SIZE=1 exported earlier and still set in srun's tasks made every task train alone as rank 0:
// torchrun's variables won, srun's were not looked at. Launchers naming different ranks are now refused, naming both.
TEST(RankInfo, LaunchersNamingDifferentRanksAreRefusedNamingBoth) {
  const std::map<std::string, std::string> master = {{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto error = [&](std::map<std::string, std::string> vars) {
    vars.insert(master.begin(), master.end());
    return test::error_message([&] { rank_info_from(env(vars)); });
  };
  EXPECT_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_PROCID", "2"}, {"SLURM_STEP_ID", "0"},
                     {"SLURM_NTASKS", "4"}}),
              HasSubstr("RANK=0 WORLD_SIZE=1 (torchrun) and SLURM_PROCID=2 SLURM_NTASKS=4 (slurm) name different"));
  // The same world, another rank: a RANK exported by hand (`export RANK=0`) in a job of as many tasks.
  EXPECT_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "1"}, {"SLURM_STEP_ID", "0"},
                     {"SLURM_STEP_NUM_TASKS", "4"}}),
              HasSubstr("RANK=0 WORLD_SIZE=4 (torchrun) and SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=4 (slurm)"));
  EXPECT_THAT(error({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"},
                     {"OMPI_COMM_WORLD_SIZE", "4"}}),
              HasSubstr("RANK=1 WORLD_SIZE=4 (torchrun) and OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4 (mpirun)"));
  // torchrun agents that are not srun's tasks (4 agents, 2 tasks): GROUP_WORLD_SIZE is named too.
  EXPECT_THAT(error({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"GROUP_WORLD_SIZE", "4"}, {"SLURM_PROCID", "1"},
                     {"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "2"}}),
              HasSubstr("RANK=5 WORLD_SIZE=16 GROUP_WORLD_SIZE=4 (torchrun) and SLURM_PROCID=1 SLURM_NTASKS=2"));
}

// What the refusal must let through: the launchers agreeing (`export RANK=$SLURM_PROCID ...` in a task), and the
// jobs started inside a launcher's tasks, whose innermost launcher names the rank: `train --gpus` or torchrun in a
// task of one, one torchrun a task of several (its rendezvous orders the agents as it likes: GROUP_RANK 1 on task 0),
// and mpirun's ranks in the srun step of its daemons (SLURM_PROCID names the node, never compared).
TEST(RankInfo, LaunchersThatAgreeOrNestNameTheInnermostsRank) {
  const std::map<std::string, std::string> master = {{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto with = [&](std::map<std::string, std::string> vars) {
    vars.insert(master.begin(), master.end());
    return rank_info_from(env(vars));
  };
  const RankInfo agree = with({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "2"}, {"SLURM_STEP_ID", "0"},
                               {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(agree.launcher, "torchrun");
  EXPECT_EQ(agree.rank, 2);
  const RankInfo in_one_task = with({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}, {"SLURM_PROCID", "0"},
                                     {"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(in_one_task.rank, 3);
  EXPECT_EQ(in_one_task.world, 4);
  const RankInfo agent_a_task = with({{"RANK", "13"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "5"},
                                      {"GROUP_WORLD_SIZE", "2"}, {"GROUP_RANK", "1"}, {"SLURM_PROCID", "0"},
                                      {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}});
  EXPECT_EQ(agent_a_task.launcher, "torchrun");
  EXPECT_EQ(agent_a_task.rank, 13);
  EXPECT_EQ(agent_a_task.world, 16);
  EXPECT_EQ(agent_a_task.local_rank, 5);
  const RankInfo torchrun_in_mpirun = with({{"RANK", "9"}, {"WORLD_SIZE", "16"}, {"GROUP_WORLD_SIZE", "2"},
                                            {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(torchrun_in_mpirun.rank, 9);
  const RankInfo mpi_in_slurm = with({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                                      {"SLURM_PROCID", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}});
  EXPECT_EQ(mpi_in_slurm.launcher, "mpirun");
  EXPECT_EQ(mpi_in_slurm.rank, 5);
  EXPECT_EQ(mpi_in_slurm.world, 8);
}

// OMPI_COMM_WORLD_SIZE without OMPI_COMM_WORLD_RANK trained as one process, silently; WORLD_SIZE without RANK was
// already an error. Both are now.
TEST(RankInfo, MpirunsSizeWithoutItsRankIsRefused) {
  EXPECT_THAT(test::error_message([] { rank_info_from(env({{"OMPI_COMM_WORLD_SIZE", "4"}})); }),
              HasSubstr("mpirun: OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE must both be set"));
}

// MASTER_PORT was read as a rank: 2000000 or -5 "is not a rank or a count (0 to 1048575)". Now every value outside
// 1..65535 is "not a port", as 70000 was.
TEST(RankInfo, MasterPortOutsideOneTo65535IsNotAPort) {
  auto with_port = [](const std::string& port) {
    return env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", port}});
  };
  for (const char* bad : {"70000", "65536", "2000000", "-5", "0", "99999999999999999999", "abc", "80x"}) {
    const std::string said = test::error_message([&] { rank_info_from(with_port(bad)); });
    EXPECT_THAT(said, HasSubstr(fmt::format("MASTER_PORT={} is not a port (1 to 65535)", bad))) << bad;
    EXPECT_THAT(said, Not(HasSubstr("rank or a count"))) << bad;
  }
  EXPECT_EQ(rank_info_from(with_port("1")).master_port, 1);
  EXPECT_EQ(rank_info_from(with_port("65535")).master_port, 65535);
}

// NNODES and NODE_RANK were read with atoi: "abc" or "" was node 0 (two node 0s in one job), "1x" was 1.
TEST(RankInfo, CountsAndRanksAreReadStrictly) {
  EXPECT_EQ(env_integer(env({{"NODE_RANK", "3"}}), "NODE_RANK"), 3);
  for (const char* bad : {"abc", "", "1x", "-1"}) {
    EXPECT_THAT(test::error_message([&] { env_integer(env({{"NODE_RANK", bad}}), "NODE_RANK"); }),
                HasSubstr(fmt::format("NODE_RANK='{}'", bad)))
        << bad;
  }
  EXPECT_THAT(test::error_message([] { env_integer(env({{"NNODES", "99999999999999999999"}}), "NNODES"); }),
              HasSubstr("is not a rank or a count (0 to 1048575)"));
}

// `train` compared NNODES with "1" as text while the launcher parsed it: NNODES=01 (or +1, " 1") started a job of one
// rank, which started another, without end (571 processes in 8 s). Both read it through node_count now.
TEST(RankInfo, NodeCountReadsNnodesAsANumber) {
  EXPECT_EQ(node_count(env({})), 1);
  for (const char* one : {"1", "01", "+1", " 1"}) EXPECT_EQ(node_count(env({{"NNODES", one}})), 1) << one;
  EXPECT_EQ(node_count(env({{"NNODES", "2"}})), 2);
  EXPECT_THAT(test::error_message([] { node_count(env({{"NNODES", "two"}})); }), HasSubstr("NNODES='two'"));
  EXPECT_EQ(node_rank(env({})), 0);
  EXPECT_EQ(node_rank(env({{"NODE_RANK", "01"}})), 1);
  EXPECT_THAT(test::error_message([] { node_rank(env({{"NODE_RANK", "-1"}})); }), HasSubstr("NODE_RANK='-1'"));
}

// NNODES x --gpus past what a rank variable can hold was an overflow in a forked rank; a NODE_RANK past NNODES a
// job that never completes. Both are refused before any rank starts (no program is run).
TEST(Launcher, ImpossibleJobsAreRefusedBeforeAnyRankStarts) {
  {
    const test::ScopedEnv nodes("NNODES", "600000");
    EXPECT_THAT(test::error_message([] { launch_local_ranks(2, "/bin/false", {}); }),
                HasSubstr("NNODES=600000 x --gpus 2: more than the 1048575 ranks a job may have"));
  }
  const test::ScopedEnv nodes("NNODES", "2");
  const test::ScopedEnv node("NODE_RANK", "2");
  EXPECT_THAT(test::error_message([] { launch_local_ranks(2, "/bin/false", {}); }),
              HasSubstr("NODE_RANK must be below NNODES"));
}

// Each rank gets the launcher's environment with its own RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
// (replacing any of them the launcher had), built before fork. The ranks here are shells that write what they got.
TEST(Launcher, EachRankGetsItsVariablesAndTheLaunchersOthers) {
  const std::filesystem::path dir = test::temp_dir("launcher-env");
  const test::ScopedEnv inherited("SPRINTNET_LAUNCHER_TEST", "kept");
  const test::ScopedEnv stale("RANK", "7");
  launch_local_ranks(2, "/bin/sh",
                     {"-c", fmt::format("echo \"$RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR $SPRINTNET_LAUNCHER_TEST\" "
                                        "> '{}'/rank-$LOCAL_RANK", dir.string())});
  EXPECT_EQ(read_file(dir / "rank-0"), "0 0 2 127.0.0.1 kept\n");
  EXPECT_EQ(read_file(dir / "rank-1"), "1 1 2 127.0.0.1 kept\n");
}

// A failed rank stops the others: SIGTERM, then SIGKILL 10 s later to a rank that ignores it; the job ends naming
// the failed rank. (The SIGKILL went from a detached thread to every rank it had started, reaped or not: a reaped
// rank's PID may be another process's by then. Now the launcher keeps reaping and kills only its unreaped ranks.)
TEST(Launcher, ARankThatIgnoresSigtermIsKilledTenSecondsAfterAnotherFails) {
  // Rank 0 fails only once rank 1 ignores SIGTERM (its marker file): otherwise the SIGTERM may come first.
  const std::filesystem::path ready = test::temp_dir("launcher-sigkill") / "ready";
  const std::string script = fmt::format(
      "if [ \"$LOCAL_RANK\" = 0 ]; then i=0; while [ ! -e '{0}' ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; "
      "exit 3; fi; trap '' TERM; touch '{0}'; exec sleep 60",
      ready.string());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(test::error_message([&] { launch_local_ranks(2, "/bin/sh", {"-c", script}); }),
              HasSubstr("data-parallel job of 2 GPUs failed: rank 0 exited with code 3"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 9.5) << "rank 1 ignores SIGTERM: only the SIGKILL 10 s later ends it";
  EXPECT_LT(seconds, 30.0) << "the SIGKILL did not come";
}

// The launcher waited with waitpid(-1): a child the process had before it became the launcher (`sh -c 'sleep 0.05 &
// exec sprintnet train ...'` leaves the shell's child to sprintnet) counted as a rank, the launcher returned success
// with a rank still running, and that rank died with it. A child of the test process stands in for it here.
TEST(Launcher, AChildItDidNotStartIsNotARank) {
  const pid_t foreign = fork();
  ASSERT_GE(foreign, 0);
  if (foreign == 0) _exit(0);
  // Rank 0 succeeds at once; rank 1 fails 0.5 s later, long after the foreign child has ended.
  EXPECT_THAT(test::error_message([] {
                launch_local_ranks(2, "/bin/sh", {"-c", "if [ \"$LOCAL_RANK\" = 1 ]; then sleep 0.5; exit 3; fi"});
              }),
              HasSubstr("data-parallel job of 2 GPUs failed: rank 1 exited with code 3"));
  int status = 0;
  EXPECT_EQ(waitpid(foreign, &status, 0), foreign) << "the launcher reaped a child it did not start";
}

// Started with SIGCHLD ignored (which exec keeps), the ranks reaped themselves: waitpid(-1) waited for all of them,
// then failed with ECHILD, and the launcher returned success whatever they did. It now waits with SIGCHLD at its
// default, and sees the failure.
TEST(Launcher, ARanksFailureIsSeenWhenStartedWithSigchldIgnored) {
  struct sigaction before {};
  sigaction(SIGCHLD, nullptr, &before);
  std::signal(SIGCHLD, SIG_IGN);
  EXPECT_THAT(test::error_message([] {
                launch_local_ranks(2, "/bin/sh", {"-c", "if [ \"$LOCAL_RANK\" = 1 ]; then sleep 0.2; exit 3; fi"});
              }),
              HasSubstr("rank 1 exited with code 3"));
  sigaction(SIGCHLD, &before, nullptr);
}

// The variables a rank of launch_local_ranks(gpus, ...) was started with, read back as rank_info_from reads them
// (each rank, a shell, writes its environment NUL-separated into <dir>/rank-<LOCAL_RANK>).
std::vector<RankInfo> ranks_as_they_read_themselves(const std::filesystem::path& dir, int gpus) {
  launch_local_ranks(gpus, "/bin/sh", {"-c", fmt::format("env -0 > '{}'/rank-$LOCAL_RANK", dir.string())});
  std::vector<RankInfo> infos;
  for (int rank = 0; rank < gpus; ++rank) {
    std::map<std::string, std::string> vars;
    const std::string written = read_file(dir / fmt::format("rank-{}", rank));
    for (std::size_t at = 0; at < written.size();) {
      const std::size_t end = std::min(written.find('\0', at), written.size());
      const std::string entry = written.substr(at, end - at);
      const std::size_t equals = entry.find('=');
      if (equals != std::string::npos) vars[entry.substr(0, equals)] = entry.substr(equals + 1);
      at = end + 1;
    }
    EXPECT_EQ(vars.count("SLURM_PROCID"), 1u) << "rank " << rank << " did not get srun's variables";
    infos.push_back(rank_info_from(test::fake_environment(vars)));
  }
  return infos;
}

// `srun -n 1 sprintnet train --gpus 2`: the ranks have srun's variables for a job of one beside the launcher's
// torchrun variables for a job of two. What the ranks are given reads as ranks 0 and 1 of 2, not as disagreeing
// launchers.
TEST(Launcher, RanksStartedInATaskOfOneReadTheirOwnRanks) {
  const test::ScopedEnv procid("SLURM_PROCID", "0");
  const test::ScopedEnv step("SLURM_STEP_ID", "0");
  const test::ScopedEnv tasks("SLURM_NTASKS", "1");
  const test::ScopedEnv step_tasks("SLURM_STEP_NUM_TASKS", "1");
  const std::vector<RankInfo> infos = ranks_as_they_read_themselves(test::temp_dir("launcher-in-srun"), 2);
  for (std::size_t rank = 0; rank < infos.size(); ++rank) {
    EXPECT_EQ(infos[rank].launcher, "torchrun");
    EXPECT_EQ(infos[rank].rank, static_cast<int>(rank));
    EXPECT_EQ(infos[rank].world, 2);
  }
}

TEST(Launcher, AFreePortIsAPort) {
  const int port = free_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace sprintnet::dist
