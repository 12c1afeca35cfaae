#pragma once
// The sprintnet binary (SPRINTNET_CLI_PATH, which the test's CMake defines) run as a user runs it:
// its exit code and what it wrote to stdout and stderr.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "sprintnet/io/read_file.h"

namespace sprintnet::test {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `sprintnet <arguments>` (already quoted where needed) by sh, or by bash (for its process substitution:
// `<(cat FILE)` gives the command a pipe, as it gives a user's); its output goes through files in `dir`.
inline CliResult run_cli(const std::string& arguments, const std::filesystem::path& dir, bool bash = false) {
  const std::filesystem::path out = dir / "stdout.txt";
  const std::filesystem::path err = dir / "stderr.txt";
  std::string command =
      fmt::format("'{}' {} > '{}' 2> '{}'", SPRINTNET_CLI_PATH, arguments, out.string(), err.string());
  if (bash) {
    const std::filesystem::path script = dir / "command.bash";
    std::ofstream(script) << command << '\n';
    command = fmt::format("bash '{}'", script.string());
  }
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

}  // namespace sprintnet::test
