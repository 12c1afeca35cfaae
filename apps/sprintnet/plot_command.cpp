// sprintnet plot RUN_DIR [RUN_DIR...] [-o OUTPUT.png]: the runs' curves overlaid in one picture.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/plot/run_curves.h"

namespace sprintnet::cli {

void add_plot_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> runs;
    std::string output;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "plot", "Draw runs' train/test loss, test accuracy and learning rate against epochs, overlaid (matplotlib)");
  cmd->add_option("runs", options->runs, "Run directories (each with metrics.jsonl)")->required();
  cmd->add_option("-o,--output", options->output,
                  "picture to write, its format by its extension: .png, .pdf or .svg (default: RUN_DIR/curves.png for "
                  "one run, curves.png here for several; /dev/stdout: PNG on stdout, redirected or piped, not a "
                  "terminal)");
  cmd->callback([options] {
    const std::vector<std::filesystem::path> runs(options->runs.begin(), options->runs.end());
    std::filesystem::path output = options->output;
    if (output.empty()) output = runs.size() == 1 ? runs.front() / plot::kCurvesFileName : plot::kCurvesFileName;
    const plot::PlotOutcome outcome = plot::draw_curves(runs, output);
    SN_CHECK(outcome.drawn, "{}", outcome.message);
    // With the picture on stdout (-o /dev/stdout), the line saying so goes to stderr: stdout holds the picture alone.
    std::fprintf(own_descriptor(output) == STDOUT_FILENO ? stderr : stdout, "%s\n", outcome.message.c_str());
  });
}

}  // namespace sprintnet::cli
