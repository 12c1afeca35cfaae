#pragma once
// `sprintnet train CONFIG --gpus N`: one process per GPU on this machine, started the way torchrun
// would start them (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT).
// With NNODES and NODE_RANK set (and MASTER_ADDR/MASTER_PORT naming node 0), this machine starts
// global ranks NODE_RANK * N .. NODE_RANK * N + N - 1 of NNODES * N. When a rank fails the others are stopped (SIGTERM, then SIGKILL after 10 s) and the launcher
// fails naming the rank: a dead rank never leaves the job hanging.
#include <string>
#include <vector>

namespace sprintnet::dist {

// Runs `program args...` as ranks 0..gpus-1 and waits for them (its own children only); returns when every rank
// succeeded, else throws naming the first rank that failed and how.
void launch_local_ranks(int gpus, const std::string& program, const std::vector<std::string>& args);
// A TCP port that was free a moment ago (bound to port 0 and released).
int free_port();

}  // namespace sprintnet::dist
