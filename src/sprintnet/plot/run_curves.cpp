#include "sprintnet/plot/run_curves.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/io/shell_word.h"
#include "sprintnet/plot/python_job.h"

namespace sprintnet::plot {
namespace {

// Three panels, every run overlaid. python3 -c SCRIPT OUTPUT RUN_DIR...: the picture replaces OUTPUT (a run's
// curves.png, drawn in the background). python3 -c SCRIPT --to-descriptor FORMAT RUN_DIR...: its bytes go to
// descriptor 3 (kOutputDescriptor), a pipe `plot` reads, and nowhere else.
constexpr const char* kScript = R"PY(
import io, json, os, stat, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

if sys.argv[1] == "--to-descriptor":
    out, kind, runs = None, sys.argv[2], sys.argv[3:]
else:  # the format is the name's (png, pdf, svg; checked before python starts)
    out, runs = sys.argv[1], sys.argv[2:]
    kind = os.path.splitext(out)[1][1:].lower() or "png"
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
if out is None:  # (its caller gone, nobody reads the pipe: the write fails, and nothing is written anywhere)
    picture = io.BytesIO()  # (drawn first: PIL's PNG writer seeks, which a pipe cannot)
    fig.savefig(picture, dpi=110, format=kind)
    with os.fdopen(3, "wb") as f:
        f.write(picture.getbuffer())
    sys.exit()
# A symbolic link is followed, so the file it names is replaced and the link stays; a pipe or a device has nothing to
# replace and is written as it is.
target = os.path.realpath(out)
if os.path.exists(target) and not stat.S_ISREG(os.stat(target).st_mode):
    picture = io.BytesIO()  # (drawn first, as above)
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

// python3 -c SCRIPT --to-descriptor FORMAT RUN_DIR...
std::vector<std::string> plot_command(const std::string& python, const std::vector<std::filesystem::path>& runs,
                                      const std::string& format) {
  std::vector<std::string> args = {python, "-c", kScript, "--to-descriptor", format};
  for (const auto& run : runs) args.push_back(run.string());
  return args;
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

// A terminal gets no picture: its bytes would fill the screen with noise (and the terminal's newline translation
// would corrupt them). Refused as gzip and curl refuse, before anything is drawn.
void refuse_a_terminal(const std::filesystem::path& output) {
  const std::optional<int> fd = own_descriptor(output);
  SN_CHECK(!fd || ::isatty(*fd) == 0,
           "plot: not writing a picture to a terminal ('{}' is descriptor {}, a terminal): redirect it to a file or "
           "a program (sprintnet plot RUN -o {} > curves.png, or | display), or give -o a file name",
           output.string(), *fd, output.string());
}

}  // namespace

bool plotter_available() { return !find_python_with_matplotlib().empty(); }

PlotOutcome draw_curves(const std::vector<std::filesystem::path>& runs, const std::filesystem::path& output) {
  SN_CHECK(!runs.empty(), "plot: no run directory given");
  for (const auto& run : runs) check_run(run);
  // Named before matplotlib starts (a second or more), not after it drew.
  check_output_file(output, "plot");
  refuse_a_terminal(output);
  std::string extension = output.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  SN_CHECK(extension.empty() || extension == ".png" || extension == ".pdf" || extension == ".svg",
           "plot: cannot write '{}': the picture's format is its name's extension, one of .png, .pdf, .svg (none: "
           "PNG)", output.string());
  const std::string python = find_python_with_matplotlib();
  if (python.empty()) return {false, fmt::format("no picture: {}; then run {}", kInstallHint, redraw_hint(runs))};
  // Python writes no file: it passes the picture's bytes back through a pipe, and this process writes them where
  // they go (a file replaced whole, a FIFO, a descriptor of ours such as /dev/stdout, which was /dev/null in
  // python). No temporary folder ($TMPDIR may not exist) and, this process killed, nothing written after it.
  std::string reason, picture;
  const int status = run_quietly(plot_command(python, runs, extension.empty() ? "png" : extension.substr(1)),
                                 &reason, &picture);
  SN_CHECK(status == 0, "plot: matplotlib could not draw {} ({} exited with status {}){}{}", output.string(), python,
           status, reason.empty() ? "" : ":\n", reason);
  // Drawn means written: a python that exits 0 without drawing (a wrapper, a site hook) must not report a picture.
  SN_CHECK(!picture.empty(), "plot: {} exited without an error but wrote no {}", python, output.string());
  write_text_file_atomically(output, picture);
  return {true, fmt::format("curves in {}", output.string())};
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
