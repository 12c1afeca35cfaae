#pragma once
// Matplotlib scripts as subprocesses: the python3 on PATH, else Debian's /usr/bin/python3 (a pyenv
// or venv python on PATH often lacks the python3-matplotlib that apt installed for the system's).
// Used by a run's curves and a sweep's pictures. No shell is involved: a PATH without sh (or
// without python3, where /usr/bin/python3 is there) still draws.
#include <string>
#include <vector>

namespace sprintnet::plot {

// What to tell a user without matplotlib.
inline constexpr const char* kInstallHint =
    "python3 with matplotlib is missing (Debian: apt install python3-matplotlib)";

// The child's descriptor that run_quietly reads when given `output`.
inline constexpr int kOutputDescriptor = 3;

// Runs argv (argv[0] looked up on PATH) with stdout sent to /dev/null and waits; returns its exit status (127: it
// could not be started). Its stderr goes to /dev/null too, or, given `error_tail`, its last lines are kept there:
// python's reason for failing (a traceback's last line). Given `output`, the child's descriptor kOutputDescriptor is a
// pipe whose bytes are kept there: a picture passed back without a file, so that nothing is left anywhere when this
// process is killed (the child's write then fails: nobody reads the pipe).
int run_quietly(const std::vector<std::string>& args, std::string* error_tail = nullptr,
                std::string* output = nullptr);
// The first python with matplotlib, or empty.
std::string find_python_with_matplotlib();
// Starts `PYTHON python_args...` with the first python that has matplotlib and returns at once:
// finding it takes from 0.05 s to seconds (a pyenv shim), so that happens in the background too.
// The job is detached (orphaned at once, so init reaps it; never a zombie of ours), ignores Ctrl-C
// as a shell's `cmd &` does, and its output goes to /dev/null. Returns why it could not start (no
// python3 at all: the message says how to install it), empty when it started.
std::string start_matplotlib_in_background(const std::vector<std::string>& python_args);

}  // namespace sprintnet::plot
