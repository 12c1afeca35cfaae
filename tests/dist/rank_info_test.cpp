// Which rank a process is, from torchrun's, SLURM's and OpenMPI's variables, and the errors that
// name the variable when they are wrong: pure functions of an environment, tested without GPUs. And the
// launcher's own checks and the environment it gives its ranks (shells standing in for them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include <map>

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

TEST(Launcher, AFreePortIsAPort) {
  const int port = free_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace sprintnet::dist
