// Time per MNIST epoch of sprintnet's Trainer for LxHxB MLPs (L linear layers,
// hidden width H, batch B): the same run a user gets from `sprintnet train`,
// with SGD momentum 0.9 at a constant lr (unless --schedule says otherwise),
// evaluation only after the last epoch (or every --eval-every epochs, untimed,
// for time-to-accuracy, whose recipe sets --lr, --schedule and --label-smoothing:
// bench/time_to_accuracy.py).
// The median is over epochs 2..N (the first captures the graph). Prints one
// JSON line per config in the format of bench/torch_epoch_bench.py, so bench/run
// can put the two side by side.
#include <algorithm>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sprintnet/memory/cuda_allocator.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/train/trainer.h"
#include "support_bench.h"

using namespace sprintnet;
using namespace sprintnet::train;

int main(int argc, char** argv) try {
  CLI::App app{"sprintnet time-per-epoch benchmark"};
  std::vector<std::string> configs{"4x784x128"};
  std::string device = "cuda", precision = "bf16", engine = "auto", data_dir = "data", activation = "relu";
  std::string optimizer = "sgd", schedule = "constant";
  int epochs = 5, eval_every = 0;
  double lr = 0.05, label_smoothing = 0.0;
  bool no_bias = false;
  app.add_option("--config", configs, "LxHxB configs, e.g. 4x784x128")->expected(1, -1);
  app.add_option("--device", device, "device.name");
  app.add_option("--precision", precision, "device.precision");
  app.add_option("--engine", engine, "device.engine");
  app.add_option("--epochs", epochs, "epochs (the first is not in the median)");
  app.add_option("--lr", lr, "learning rate");
  app.add_option("--optimizer", optimizer, "optim.type (sgd: momentum 0.9)");
  app.add_option("--schedule", schedule, "schedule.type (cosine: to 0 over the run's epochs)");
  app.add_option("--label-smoothing", label_smoothing, "loss.label_smoothing");
  app.add_option("--data", data_dir, "data.dir");
  app.add_option("--eval-every", eval_every, "evaluate every N epochs (0: after the last only; not timed)");
  app.add_flag("--no-bias", no_bias, "Linear layers without bias");
  app.add_option("--activation", activation, "model.activation");
  CLI11_PARSE(app, argc, argv);

  for (const std::string& text : configs) {
    const bench::MlpShape shape = bench::parse_shape(text);
    const std::vector<std::int64_t> hidden(static_cast<std::size_t>(shape.layers - 1), shape.width);
    Config config = config_from_overrides({
        fmt::format("data.dir=\"{}\"", data_dir),
        fmt::format("model.hidden=[{}]", fmt::join(hidden, ", ")),
        fmt::format("train.batch_size={}", shape.batch),
        fmt::format("train.epochs={}", epochs),
        fmt::format("train.eval_every={}", eval_every),
        fmt::format("model.bias={}", no_bias ? "false" : "true"),
        fmt::format("model.activation=\"{}\"", activation),
        fmt::format("optim.type=\"{}\"", optimizer),
        fmt::format("optim.lr={}", lr),
        "optim.momentum=0.9",  // SGD's; Adam's betas keep their defaults
        fmt::format("schedule.type=\"{}\"", schedule),
        fmt::format("loss.label_smoothing={}", label_smoothing),
        fmt::format("device.name=\"{}\"", device),
        fmt::format("device.precision=\"{}\"", precision),
        fmt::format("device.engine=\"{}\"", engine),
        "output.dir=\"/tmp/sprintnet-bench\"",
        "output.progress=\"none\"",
        "checkpoint.every_epochs=0",
    });
    Trainer trainer(std::move(config));
    const Device device_used = trainer.device();
    const AllocatorStats before = device_used.is_cuda() ? cuda_allocator_stats(device_used.index) : AllocatorStats{};
    const TrainSummary summary = trainer.fit();
    // Device memory the run holds at its peak (the caching allocator's count; the cuBLASLt
    // workspaces, 32 MiB each, come on top). Runs in one process: the peak is the largest so far.
    const AllocatorStats after = device_used.is_cuda() ? cuda_allocator_stats(device_used.index) : AllocatorStats{};
    const double peak_mb = static_cast<double>(std::max(after.peak_allocated_bytes, before.peak_allocated_bytes)) /
                           (1024.0 * 1024.0);
    std::vector<double> ms, losses;
    nlohmann::json accuracy = nlohmann::json::array();  // per epoch; null where not evaluated
    for (const EpochRecord& e : summary.epochs) {
      ms.push_back(1e3 * e.epoch_time_s);
      losses.push_back(e.train_loss);
      accuracy.push_back(e.test_accuracy ? nlohmann::json(*e.test_accuracy) : nlohmann::json());
    }
    std::vector<double> tail(ms.begin() + (ms.size() > 1 ? 1 : 0), ms.end());
    std::sort(tail.begin(), tail.end());
    const double median = tail[tail.size() / 2];
    const std::int64_t steps = trainer.steps_per_epoch();
    const double flops = nn::mlp_train_flops(trainer.spec(), shape.batch) * static_cast<double>(steps);
    nlohmann::json row = {{"system", "sprintnet"},
                          {"mode", engine_name(trainer.engine())},
                          {"activation", activation},
                          {"optimizer", optimizer},
                          {"lr", lr},
                          {"schedule", schedule},
                          {"label_smoothing", label_smoothing},
                          {"precision", trainer.precision()},
                          {"config", text},
                          {"batch", shape.batch},
                          {"steps_per_epoch", steps},
                          {"epochs", epochs},
                          {"epoch_ms", ms},
                          {"epoch_ms_median", median},
                          {"samples_per_s", static_cast<double>(steps * shape.batch) / (median / 1e3)},
                          {"tflops", flops / (median / 1e3) / 1e12},
                          {"train_loss", losses},
                          {"test_accuracy", summary.final_test.accuracy},
                          {"epoch_test_accuracy", accuracy},
                          {"bias", !no_bias},
                          {"peak_mem_mb", peak_mb},
                          {"wall_s", summary.wall_time_s}};
    std::printf("%s\n", row.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "epoch_bench: %s\n", e.what());
  return 1;
}
