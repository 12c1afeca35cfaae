#pragma once
// Matplotlib scripts as subprocesses: the python3 on PATH, else Debian's /usr/bin/python3 (a pyenv
// or venv python on PATH often lacks the python3-matplotlib that apt installed for the system's).
// Used by a run's curves and a sweep's pictures.
#include <string>
#include <vector>

namespace sprintnet::plot {

// What to tell a user without matplotlib.
inline constexpr const char* kInstallHint =
    "python3 with matplotlib is missing (Debian: apt install python3-matplotlib)";

// Runs argv (argv[0] looked up on PATH) with stdout and stderr sent to /dev/null; returns its exit status.
int run_quietly(const std::vector<std::string>& args);
// The first python with matplotlib, or empty.
std::string find_python_with_matplotlib();
// Starts `PYTHON python_args...` with the first python that has matplotlib and returns at once:
// finding it takes from 0.05 s to seconds (a pyenv shim), so that happens in the background too.
// The arguments reach python as positional parameters, never through the shell's parser. False
// when sh could not be started.
bool start_matplotlib_in_background(const std::vector<std::string>& python_args);

}  // namespace sprintnet::plot
