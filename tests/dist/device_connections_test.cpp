// Which processes ask the driver for fewer hardware queues (dist/device_connections.h): a pure
// function of the environment and of whether the process launches ranks.
#include <gtest/gtest.h>

#include <map>

#include "sprintnet/dist/device_connections.h"
#include "support/fake_environment.h"

namespace sprintnet::dist {
namespace {

constexpr auto* env = &test::fake_environment;  // env({{"RANK", "1"}, ...}): variables from a map

TEST(DeviceConnections, AProcessTrainingAloneTakesTwo) {
  EXPECT_EQ(preferred_device_connections(env({}), false), "2");
  // One rank of one is no data-parallel job.
  EXPECT_EQ(preferred_device_connections(env({{"RANK", "0"}, {"WORLD_SIZE", "1"}}), false), "2");
}

TEST(DeviceConnections, TheUsersOwnValueWins) {
  EXPECT_EQ(preferred_device_connections(env({{"CUDA_DEVICE_MAX_CONNECTIONS", "8"}}), false), std::nullopt);
  EXPECT_EQ(preferred_device_connections(env({{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}), false), std::nullopt);
}

TEST(DeviceConnections, DataParallelRanksAndTheirLauncherKeepTheDriversDefault) {
  const std::map<std::string, std::string> master = {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](std::map<std::string, std::string> vars) {
    vars.insert(master.begin(), master.end());
    return env(vars);
  };
  EXPECT_EQ(preferred_device_connections(with({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}), false),
            std::nullopt);
  EXPECT_EQ(preferred_device_connections(
                with({{"SLURM_PROCID", "0"}, {"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}}),
                false),
            std::nullopt);
  EXPECT_EQ(preferred_device_connections(
                with({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}),
                false),
            std::nullopt);
  // Launcher variables that do not make a rank (a stray WORLD_SIZE): no error here, and the driver's default.
  EXPECT_EQ(preferred_device_connections(env({{"WORLD_SIZE", "2"}}), false), std::nullopt);
  // An sbatch script's own shell (SLURM_PROCID, SLURM_NTASKS, no step) runs one process, as outside SLURM.
  EXPECT_EQ(preferred_device_connections(env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}), false), "2");
  // `--gpus N`: the ranks inherit the launcher's environment.
  EXPECT_EQ(preferred_device_connections(env({}), true), std::nullopt);
}

}  // namespace
}  // namespace sprintnet::dist
