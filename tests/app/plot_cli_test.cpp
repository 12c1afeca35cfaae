// `sprintnet plot` run as a user runs it, for what only the process shows: a picture sent to stdout
// (-o /dev/stdout) through a shell's redirection or pipe is the picture alone, the line saying where it went on
// stderr. The run is a metrics.jsonl of three epochs written here (nothing is trained).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "cli_run.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/plot/run_curves.h"
#include "support/test_util.h"

namespace sprintnet::plot {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kPngSignature("\x89PNG\r\n\x1a\n", 8);
const std::string kPngEnd("IEND\xae\x42\x60\x82", 8);  // the last chunk, with its CRC: the picture is whole

fs::path three_epochs(const fs::path& dir) {
  const fs::path run = dir / "run";
  fs::create_directory(run);
  std::ofstream out(run / "metrics.jsonl");
  for (int epoch = 1; epoch <= 3; ++epoch) {
    out << fmt::format("{{\"step\":{},\"epoch\":{},\"train_loss\":{},\"test_loss\":{},\"test_accuracy\":{},"
                       "\"epoch_time_s\":0.1,\"samples_per_s\":1000,\"lr\":0.05}}\n",
                       10 * epoch, epoch, 1.0 / epoch, 1.1 / epoch, 0.8 + 0.05 * epoch);
  }
  return run;
}

// Python drew into its own stdout, /dev/null: redirected to a file, `plot` failed ("wrote no /dev/stdout"); piped, it
// exited 0 having written only "curves in /dev/stdout" into the pipe.
TEST(PlotCli, APictureOnStdoutIsThePictureAlone) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed";
  const fs::path dir = test::temp_dir("plot-cli-stdout");
  const fs::path run = three_epochs(dir);
  const test::CliResult redirected = test::run_cli(fmt::format("plot '{}' -o /dev/stdout", run.string()), dir);
  ASSERT_EQ(redirected.exit_code, 0) << redirected.err;
  EXPECT_TRUE(redirected.out.starts_with(kPngSignature));
  EXPECT_TRUE(redirected.out.ends_with(kPngEnd)) << "anything after the picture?";
  EXPECT_THAT(redirected.err, HasSubstr("curves in /dev/stdout"));

  const fs::path piped = dir / "piped.png", err = dir / "err.txt";
  const std::string command = fmt::format("'{}' plot '{}' -o /dev/stdout 2> '{}' | cat > '{}'", SPRINTNET_CLI_PATH,
                                          run.string(), err.string(), piped.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << read_file(err);
  EXPECT_EQ(read_file(piped), redirected.out);  // the same drawing, byte for byte
}

}  // namespace
}  // namespace sprintnet::plot
