// Times sprintnet training steps (forward, loss, backward, SGD-momentum update)
// for an LxHxB MLP (L linear layers, L-1 hidden of width H, batch B) on random
// MNIST-shaped data, through the eager API (--engine eager) or the compiled CPU
// step the Trainer runs (--engine compiled, fp32 or bf16; its steps also gather
// each batch from uint8 images). Prints one JSON line per config: median time per
// step over repeats, samples/s, and the time of a 468-step MNIST epoch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/train_plan.h"
#include "support_bench.h"

using namespace sprintnet;

int main(int argc, char** argv) try {
  CLI::App app{"sprintnet training-step benchmark"};
  std::vector<std::string> configs{"4x784x128", "3x256x128"};
  std::string device_name = "cpu";
  std::string engine = "eager", precision = "fp32";
  int threads = 0, steps = 50, repeats = 5, warmup = 10;
  app.add_option("--config", configs, "LxHxB configs, e.g. 4x784x128")->expected(1, -1);
  app.add_option("--device", device_name, "cpu or cuda");
  app.add_option("--threads", threads, "CPU threads (0 = all cores)");
  app.add_option("--engine", engine, "eager (module by module) or compiled (the CPU's TrainPlan)")
      ->check(CLI::IsMember({"eager", "compiled"}));
  app.add_option("--precision", precision, "compiled engine: fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--steps", steps, "steps per timed repeat");
  app.add_option("--repeats", repeats, "timed repeats (the median is reported)");
  app.add_option("--warmup", warmup, "untimed steps first");
  CLI11_PARSE(app, argc, argv);

  const Device device = parse_device(device_name);
  set_cpu_threads(threads);
  constexpr std::int64_t kInputs = 784, kClasses = 10, kStepsPerEpoch = 468;
  for (const std::string& text : configs) {
    const bench::MlpShape shape = bench::parse_shape(text);
    nn::MlpSpec spec{kInputs, std::vector<std::int64_t>(static_cast<std::size_t>(shape.layers - 1), shape.width),
                     kClasses};
    Generator gen(0);
    auto model = nn::make_mlp(spec, gen, device);
    nn::CrossEntropyLoss criterion;
    optim::SGD optimizer(model->parameters(), {.lr = 0.01, .momentum = 0.9});
    const Tensor x = bench::random_tensor({shape.batch, kInputs}, gen, device);
    const Tensor y = bench::random_labels(shape.batch, kClasses, gen, device);
    // The compiled step reads its batches from a uint8 data set, as in training: 32 batches' worth.
    const std::int64_t samples = 32 * shape.batch;
    Dataset data;
    std::unique_ptr<train::BatchLoader> loader;
    std::unique_ptr<train::TrainPlan> plan;
    std::int64_t plan_steps = 0;
    if (engine == "compiled") {
      SN_CHECK(device.is_cpu(), "--engine compiled times the CPU's compiled step; the GPU's: bench/epoch_bench");
      data = bench::random_dataset(samples, kInputs, kClasses, gen);
      loader = std::make_unique<train::BatchLoader>(data, Normalization{1.0 / 255, -0.5},
                                                    train::LoaderOptions{shape.batch, true, true, 1}, device);
      train::TrainPlanSpec plan_spec;
      plan_spec.mlp = spec;
      plan_spec.optim.type = "sgd";
      plan_spec.optim.lr = 0.01;
      plan_spec.optim.momentum = 0.9;
      plan_spec.precision = precision;
      plan_spec.train = loader.get();
      // A constant rate: one entry a step the bench runs (a step past the table is an error).
      plan_spec.lr_per_step.assign(static_cast<std::size_t>(warmup + repeats * steps), 0.01);
      plan = train::make_cpu_train_plan(plan_spec);
      plan->load(*model, optimizer);
    }
    auto step = [&] {
      if (plan) {
        if (plan_steps % loader->batches_per_epoch() == 0) plan->start_epoch(plan_steps / loader->batches_per_epoch());
        plan->step();
        ++plan_steps;
        return;
      }
      optimizer.zero_grad();
      criterion.forward(model->forward(x), y);
      model->backward(criterion.backward());
      optimizer.step();
    };
    for (int i = 0; i < warmup; ++i) step();
    backend_for(device).synchronize();
    std::vector<double> per_step_s;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) step();
      backend_for(device).synchronize();
      per_step_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps);
    }
    std::sort(per_step_s.begin(), per_step_s.end());
    const double median = per_step_s[per_step_s.size() / 2];
    nlohmann::json row = {{"system", "sprintnet"},
                          {"engine", engine},
                          {"precision", engine == "compiled" ? precision : "fp32"},
                          {"device", device.str()},
                          {"threads", device.is_cpu() ? cpu_threads() : 0},
                          {"config", text},
                          {"step_ms", median * 1e3},
                          {"epoch_ms", median * 1e3 * kStepsPerEpoch},
                          {"samples_per_s", static_cast<double>(shape.batch) / median},
                          {"gflops", nn::mlp_train_flops(spec, shape.batch) / median / 1e9}};
    std::printf("%s\n", row.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "step_bench: %s\n", e.what());
  return 1;
}
