#include "sprintnet/plot/run_curves.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/io/shell_word.h"
#include "sprintnet/plot/python_job.h"

namespace sprintnet::plot {
namespace {

// python3 -c SCRIPT OUTPUT RUN_DIR...: three panels, every run overlaid.
constexpr const char* kScript = R"PY(
import io, json, os, stat, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out, runs = sys.argv[1], sys.argv[2:]
# A "$" in a run's name is text, not a formula to fail on. Escaped where names are drawn: turning math text off
# (rcParams["text.parse_math"]) would print the log axis's ticks as "$\mathdefault{10^{-1}}$".
text = lambda s: s.replace("$", r"\$")
nan_for_none = lambda v: float("nan") if v is None else v  # a diverged loss is null in metrics.jsonl
fig, (loss_ax, acc_ax, lr_ax) = plt.subplots(1, 3, figsize=(13, 3.8))
for i, run in enumerate(runs):
    # Complete lines only: a cut-off last line is a killed run's unfinished write.
    rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl")) if line.endswith("\n")]
    name = text(os.path.basename(os.path.normpath(run)))
    colour = f"C{i % 10}"
    epochs = [r["epoch"] for r in rows]
    loss_ax.plot(epochs, [nan_for_none(r["train_loss"]) for r in rows], color=colour, marker=".", label=f"{name} train")
    # Evaluated epochs: an accuracy. (A diverged test loss is null too, and its accuracy still counts.)
    tested = [r for r in rows if r.get("test_accuracy") is not None]
    if tested:
        loss_ax.plot([r["epoch"] for r in tested], [nan_for_none(r["test_loss"]) for r in tested], color=colour,
                     marker=".", linestyle="--", label=f"{name} test")
        acc_ax.plot([r["epoch"] for r in tested], [100 * r["test_accuracy"] for r in tested], color=colour,
                    marker=".", label=name)
    lr_ax.plot(epochs, [r["lr"] for r in rows], color=colour, marker=".", label=name)
loss_ax.set(xlabel="epoch", ylabel="loss (train solid, test dashed)", yscale="log", title="loss")
acc_ax.set(xlabel="epoch", ylabel="test accuracy %", title="test accuracy")
lr_ax.set(xlabel="epoch", ylabel="learning rate (last step of the epoch)", title="learning rate")
for ax in (loss_ax, acc_ax, lr_ax):
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # (an empty legend is a warning and an empty box)
        ax.legend(fontsize=7)
fig.tight_layout()
# The format is the name's (png, pdf, svg; checked before python starts). A symbolic link is followed, so the file
# it names is replaced and the link stays; a pipe or a device has nothing to replace and is written as it is.
kind = os.path.splitext(out)[1][1:].lower() or "png"
target = os.path.realpath(out)
if os.path.exists(target) and not stat.S_ISREG(os.stat(target).st_mode):
    picture = io.BytesIO()  # (drawn first: PIL's PNG writer seeks, which a pipe cannot)
    fig.savefig(picture, dpi=110, format=kind)
    with open(target, "wb") as f:
        f.write(picture.getbuffer())
else:
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.tmp.{os.getpid()}")
    try:
        fig.savefig(tmp, dpi=110, format=kind)
        os.replace(tmp, target)  # never a half-written picture
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
)PY";

std::vector<std::string> plot_command(const std::string& python, const std::vector<std::filesystem::path>& runs,
                                      const std::filesystem::path& output) {
  std::vector<std::string> args = {python, "-c", kScript, output.string()};
  for (const auto& run : runs) args.push_back(run.string());
  return args;
}

// 0 when `path` is absent. The script renames a new file into place, so a picture left from before keeps its inode.
ino_t inode_of(const std::filesystem::path& path) {
  struct stat status = {};
  return ::stat(path.c_str(), &status) == 0 ? status.st_ino : 0;
}

std::string redraw_hint(const std::vector<std::filesystem::path>& runs) {
  std::string hint = "sprintnet plot";
  for (const auto& run : runs) {
    hint += ' ';
    hint += shell_quoted(run.string());  // pasted into a shell whatever the run's name holds
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
    // Named here: matplotlib's failure would name nothing.
    SN_CHECK(check_metrics_jsonl(run / "metrics.jsonl") > 0,
             "{}: metrics.jsonl holds no epoch yet (the run stopped before its first epoch ended): nothing to plot",
             run.string());
  }
  // Named here too, before matplotlib starts: its own reason for a file it cannot write names its temporary.
  check_output_file(output, "plot");
  std::string extension = output.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  SN_CHECK(extension.empty() || extension == ".png" || extension == ".pdf" || extension == ".svg",
           "plot: cannot write '{}': the picture's format is its name's extension, one of .png, .pdf, .svg (none: "
           "PNG)", output.string());
  // A pipe or a device (after any links) is written as it is: no new file to check for afterwards.
  std::error_code ec;
  const std::filesystem::file_status kind = std::filesystem::status(output, ec);
  const bool replaced = !std::filesystem::exists(kind) || std::filesystem::is_regular_file(kind);
  const std::string python = find_python_with_matplotlib();
  if (python.empty()) return {false, fmt::format("no picture: {}; then run {}", kInstallHint, redraw_hint(runs))};
  const ino_t before = inode_of(output);
  std::string reason;
  const int status = run_quietly(plot_command(python, runs, output), &reason);
  SN_CHECK(status == 0, "plot: matplotlib could not draw {} ({} exited with status {}){}{}", output.string(), python,
           status, reason.empty() ? "" : ":\n", reason);
  // Drawn means written: a python that exits 0 without drawing (a wrapper, a site hook) must not report a picture.
  const ino_t after = inode_of(output);
  SN_CHECK(!replaced || (after != 0 && after != before), "plot: {} exited without an error but wrote no {}", python, output.string());
  return {true, fmt::format("curves in {}", output.string())};
}

PlotOutcome draw_run_curves_in_background(const std::filesystem::path& run_dir) {
  const std::filesystem::path output = run_dir / kCurvesFileName;
  const std::string not_started = start_matplotlib_in_background({"-c", kScript, output.string(), run_dir.string()});
  if (!not_started.empty()) {
    return {false, fmt::format("warning: no {}: {}; then run {}", kCurvesFileName, not_started, redraw_hint({run_dir}))};
  }
  return {true, fmt::format("curves: {} (drawn in the background by matplotlib; if it does not appear, {}; then run "
                            "{})",
                            output.string(), kInstallHint, redraw_hint({run_dir}))};
}

}  // namespace sprintnet::plot
