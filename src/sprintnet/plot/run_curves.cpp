#include "sprintnet/plot/run_curves.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include "sprintnet/core/error.h"

extern char** environ;

namespace sprintnet::plot {
namespace {

// python3 -c SCRIPT OUTPUT RUN_DIR...: three panels, every run overlaid.
constexpr const char* kScript = R"PY(
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out, runs = sys.argv[1], sys.argv[2:]
fig, (loss_ax, acc_ax, lr_ax) = plt.subplots(1, 3, figsize=(13, 3.8))
for i, run in enumerate(runs):
    rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl")) if line.strip()]
    name = os.path.basename(os.path.normpath(run))
    colour = f"C{i % 10}"
    epochs = [r["epoch"] for r in rows]
    loss_ax.plot(epochs, [r["train_loss"] for r in rows], color=colour, marker=".", label=f"{name} train")
    tested = [r for r in rows if r.get("test_loss") is not None]
    if tested:
        loss_ax.plot([r["epoch"] for r in tested], [r["test_loss"] for r in tested], color=colour, marker=".",
                     linestyle="--", label=f"{name} test")
        acc_ax.plot([r["epoch"] for r in tested], [100 * r["test_accuracy"] for r in tested], color=colour,
                    marker=".", label=name)
    lr_ax.plot(epochs, [r["lr"] for r in rows], color=colour, marker=".", label=name)
loss_ax.set(xlabel="epoch", ylabel="loss (train solid, test dashed)", yscale="log", title="loss")
acc_ax.set(xlabel="epoch", ylabel="test accuracy %", title="test accuracy")
lr_ax.set(xlabel="epoch", ylabel="learning rate (last step of the epoch)", title="learning rate")
for ax in (loss_ax, acc_ax, lr_ax):
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
fig.tight_layout()
tmp = out + ".tmp.png"
fig.savefig(tmp, dpi=110)
os.replace(tmp, out)  # never a half-written picture
)PY";

constexpr const char* kInstallHint = "python3 with matplotlib is missing (Debian: apt install python3-matplotlib)";

// Runs argv (argv[0] looked up on PATH) with stdout and stderr sent to /dev/null; returns its exit status.
int run_quietly(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// The python3 on PATH, else Debian's own: a pyenv or venv python on PATH often lacks the
// python3-matplotlib that apt installed for /usr/bin/python3.
constexpr const char* kPythons = "python3 /usr/bin/python3";
// Exits 0 when matplotlib can be imported (without importing it: fast).
constexpr const char* kHasMatplotlib = "import importlib.util, sys; sys.exit(importlib.util.find_spec('matplotlib') is None)";

// The first of kPythons with matplotlib, or empty.
std::string find_python_with_matplotlib() {
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    if (run_quietly({python, "-c", kHasMatplotlib}) == 0) return python;
  }
  return {};
}

std::vector<std::string> plot_command(const std::string& python, const std::vector<std::filesystem::path>& runs,
                                      const std::filesystem::path& output) {
  std::vector<std::string> args = {python, "-c", kScript, output.string()};
  for (const auto& run : runs) args.push_back(run.string());
  return args;
}

std::string redraw_hint(const std::vector<std::filesystem::path>& runs) {
  std::string hint = "sprintnet plot";
  for (const auto& run : runs) {
    hint += ' ';
    hint += run.string();
  }
  return hint;
}

}  // namespace

bool plotter_available() { return !find_python_with_matplotlib().empty(); }

PlotOutcome draw_curves(const std::vector<std::filesystem::path>& runs, const std::filesystem::path& output) {
  SN_CHECK(!runs.empty(), "plot: no run directory given");
  for (const auto& run : runs) {
    SN_CHECK(std::filesystem::exists(run / "metrics.jsonl"), "{}: no metrics.jsonl (not a sprintnet run directory?)",
             run.string());
  }
  const std::string python = find_python_with_matplotlib();
  if (python.empty()) return {false, fmt::format("no picture: {}; then run {}", kInstallHint, redraw_hint(runs))};
  SN_CHECK(run_quietly(plot_command(python, runs, output)) == 0, "plot: matplotlib could not draw {} from {}", output.string(),
           redraw_hint(runs));
  return {true, fmt::format("curves in {}", output.string())};
}

PlotOutcome draw_run_curves_in_background(const std::filesystem::path& run_dir) {
  const std::filesystem::path output = run_dir / kCurvesFileName;
  // Finding a python with matplotlib takes from 0.05 s to seconds (a pyenv shim), so that happens
  // in the background too: sh starts a subshell that tries each python and exits at once; the
  // subshell, orphaned, is reaped by init. The script, output and run reach python as sh's
  // positional parameters, never through the shell's parser.
  const std::string job = fmt::format(
      "(for py in {}; do if \"$py\" -c \"{}\"; then exec \"$py\" -c \"$0\" \"$@\"; fi; done) "
      ">/dev/null 2>&1 </dev/null &",
      kPythons, kHasMatplotlib);
  if (run_quietly({"sh", "-c", job, kScript, output.string(), run_dir.string()}) != 0) {
    return {false, fmt::format("no {}: could not start sh", kCurvesFileName)};
  }
  return {true, fmt::format("curves: {} (drawn in the background by matplotlib; if it does not appear, {}; then run "
                            "sprintnet plot {})",
                            output.string(), kInstallHint, run_dir.string())};
}

}  // namespace sprintnet::plot
