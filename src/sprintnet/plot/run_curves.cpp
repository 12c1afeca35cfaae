#include "sprintnet/plot/run_curves.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/io/read_file.h"
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
# A run's name as drawn. A "$" is text, not a formula to fail on: escaped (turning math text off,
# rcParams["text.parse_math"], would print the log axis's ticks as "$\mathdefault{10^{-1}}$"). A leading "_" would
# leave the run out of the legend (matplotlib's mark of a line to leave out): a zero-width space goes before it.
def text(name):
    name = name.replace("$", r"\$")
    return "\u200b" + name if name.startswith("_") else name
nan_for_none = lambda v: float("nan") if v is None else v  # a diverged loss is null in metrics.jsonl
COLUMNS = ("step", "epoch", "train_loss", "test_loss", "test_accuracy", "epoch_time_s", "samples_per_s", "lr")
number = lambda v: v is None or type(v) in (int, float)  # (not a bool)
is_row = lambda r: (isinstance(r, dict) and all(c in r for c in COLUMNS) and type(r["epoch"]) is int
                    and all(number(r[c]) for c in COLUMNS))

def refuse(constant):  # NaN and Infinity, which python's json takes and JSON (and nlohmann) has not
    raise ValueError(constant)

def rows_of(run):
    # read_metrics_jsonl's rules (io/metrics_writer.h), which the C++ side checks before it starts this: a byte order
    # mark before the first line skipped; a last line without its newline a row when it is a whole one (a hand edit),
    # a killed run's unfinished write otherwise. (newline="": a "\r" splits no line, as in C++; bytes that are not
    # UTF-8 in a complete line were refused there, and in a cut one they make it no row.)
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8-sig", errors="replace", newline="") as f:
        *lines, last = f.read().split("\n")
    rows = [json.loads(line, parse_constant=refuse) for line in lines]
    try:
        last = json.loads(last, parse_constant=refuse) if last else None
    except ValueError:
        last = None
    return rows + [last] if is_row(last) else rows

# A colour of its own for every run (C{i % 10} gave the 11th the first's): up to 10, matplotlib's; up to 20, tab20's
# (its even entries are those 10, its odd ones lighter shades of them); beyond, evenly spaced along turbo. Each curve
# has an id (gid), which an SVG keeps.
colours = ([f"C{i}" for i in range(len(runs))] if len(runs) <= 10 else
           [plt.get_cmap("tab20")(2 * i % 20 + i // 10) for i in range(len(runs))] if len(runs) <= 20 else
           [plt.get_cmap("turbo")(i / (len(runs) - 1)) for i in range(len(runs))])
fig, (loss_ax, acc_ax, lr_ax) = plt.subplots(1, 3, figsize=(13, 3.8))
for i, run in enumerate(runs):
    rows = rows_of(run)
    name = text(os.path.basename(os.path.normpath(run)))
    colour = colours[i]
    epochs = [r["epoch"] for r in rows]
    loss_ax.plot(epochs, [nan_for_none(r["train_loss"]) for r in rows], color=colour, marker=".",
                 label=f"{name} train", gid=f"train-loss-{i}")
    # Evaluated epochs: an accuracy. (A diverged test loss is null too, and its accuracy still counts.)
    tested = [r for r in rows if r.get("test_accuracy") is not None]
    if tested:
        loss_ax.plot([r["epoch"] for r in tested], [nan_for_none(r["test_loss"]) for r in tested], color=colour,
                     marker=".", linestyle="--", label=f"{name} test", gid=f"test-loss-{i}")
        acc_ax.plot([r["epoch"] for r in tested], [100 * r["test_accuracy"] for r in tested], color=colour,
                    marker=".", label=name, gid=f"test-accuracy-{i}")
    lr_ax.plot(epochs, [nan_for_none(r["lr"]) for r in rows], color=colour, marker=".", label=name, gid=f"lr-{i}")
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

// A run `plot` can draw, or an error naming it: no metrics.jsonl, one without an epoch, a row matplotlib would choke
// on (named with its line here: python's failure would name nothing).
void check_run(const std::filesystem::path& run) {
  std::error_code ec;
  const std::filesystem::file_status metrics = std::filesystem::status(run / "metrics.jsonl", ec);
  const bool missing = !ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
  SN_CHECK(std::filesystem::exists(metrics) || missing, "{}: cannot read metrics.jsonl: {}", run.string(),
           ec.message());
  SN_CHECK(std::filesystem::exists(metrics), "{}: no metrics.jsonl (not a sprintnet run directory?)", run.string());
  SN_CHECK(check_metrics_jsonl(run / "metrics.jsonl") > 0,
           "{}: metrics.jsonl holds no epoch yet (the run stopped before its first epoch ended): nothing to plot",
           run.string());
}

// A new folder in the temporary directory ($TMPDIR, else /tmp), removed with what it holds at the end of the scope.
class TemporaryFolder {
 public:
  TemporaryFolder() {
    std::string name = (std::filesystem::temp_directory_path() / "sprintnet-plot.XXXXXX").string();
    SN_CHECK(::mkdtemp(name.data()) != nullptr, "plot: cannot make a folder in {} to draw into: {}",
             std::filesystem::temp_directory_path().string(), std::strerror(errno));
    path_ = name;
  }
  ~TemporaryFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

bool plotter_available() { return !find_python_with_matplotlib().empty(); }

PlotOutcome draw_curves(const std::vector<std::filesystem::path>& runs, const std::filesystem::path& output) {
  SN_CHECK(!runs.empty(), "plot: no run directory given");
  for (const auto& run : runs) check_run(run);
  // Named here too, before matplotlib starts: its own reason for a file it cannot write names its temporary.
  check_output_file(output, "plot");
  std::string extension = output.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  SN_CHECK(extension.empty() || extension == ".png" || extension == ".pdf" || extension == ".svg",
           "plot: cannot write '{}': the picture's format is its name's extension, one of .png, .pdf, .svg (none: "
           "PNG)", output.string());
  const std::string python = find_python_with_matplotlib();
  if (python.empty()) return {false, fmt::format("no picture: {}; then run {}", kInstallHint, redraw_hint(runs))};
  std::string reason;
  const auto check_status = [&](int status) {
    SN_CHECK(status == 0, "plot: matplotlib could not draw {} ({} exited with status {}){}{}", output.string(), python,
             status, reason.empty() ? "" : ":\n", reason);
  };
  const std::string drawn = fmt::format("curves in {}", output.string());
  if (is_written_in_place(output)) {
    // A pipe, a device, or a descriptor of ours (/dev/stdout): python draws into a file of a folder of its own, and
    // this process writes the bytes where they go. (Python's own stdout is /dev/null, which /dev/stdout named there.)
    const TemporaryFolder folder;
    const std::filesystem::path picture = folder.path() / ("curves" + output.extension().string());
    check_status(run_quietly(plot_command(python, runs, picture), &reason));
    const std::optional<std::string> bytes = try_read_file(picture);
    SN_CHECK(bytes && !bytes->empty(), "plot: {} exited without an error but wrote no {}", python, output.string());
    write_text_file_atomically(output, *bytes);
    return {true, drawn};
  }
  const ino_t before = inode_of(output);
  check_status(run_quietly(plot_command(python, runs, output), &reason));
  // Drawn means written: a python that exits 0 without drawing (a wrapper, a site hook) must not report a picture.
  const ino_t after = inode_of(output);
  SN_CHECK(after != 0 && after != before, "plot: {} exited without an error but wrote no {}", python, output.string());
  return {true, drawn};
}

PlotOutcome draw_run_curves_in_background(const std::filesystem::path& run_dir) {
  const std::filesystem::path output = run_dir / kCurvesFileName;
  try {
    check_run(run_dir);  // as `plot` checks: the script, detached, would fail where nobody reads why
  } catch (const Error& e) {
    return {false, fmt::format("warning: no {}: {}", kCurvesFileName, e.what())};
  }
  const std::string not_started = start_matplotlib_in_background({"-c", kScript, output.string(), run_dir.string()});
  if (!not_started.empty()) {
    return {false, fmt::format("warning: no {}: {}; then run {}", kCurvesFileName, not_started, redraw_hint({run_dir}))};
  }
  return {true, fmt::format("curves: {} (drawn in the background by matplotlib; if it does not appear, {}; then run "
                            "{})",
                            output.string(), kInstallHint, redraw_hint({run_dir}))};
}

}  // namespace sprintnet::plot
