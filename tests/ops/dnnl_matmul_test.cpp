// The compiled CPU step's oneDNN products (ops/cpu/dnnl_matmul.h): each product form against a naive loop
// in double; and JitSignalShield (ops/cpu/jit_signal_shield.h): the masks it sets and gives back, and the
// products under a stream of signals whose handler runs on the computing thread, which corrupted the heap
// before it.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dnnl_matmul.h"
#include "sprintnet/ops/cpu/jit_signal_shield.h"
#include "sprintnet/ops/ops.h"
#include "support/signal_storm.h"
#include "support/test_util.h"

namespace sprintnet::cpu {
namespace {

struct Operands {
  std::vector<float> a, b, bias, c;
  std::vector<std::uint16_t> a16, b16;  // a and b in bf16 (their upper halves), for bf16 products

  const void* a_data(MatmulInput input) const { return input == MatmulInput::kBF16 ? static_cast<const void*>(a16.data()) : a.data(); }
  const void* b_data(MatmulInput input) const { return input == MatmulInput::kBF16 ? static_cast<const void*>(b16.data()) : b.data(); }
};

std::vector<std::uint16_t> upper_halves(const std::vector<float>& values) {
  std::vector<std::uint16_t> halves(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &values[i], sizeof bits);
    halves[i] = static_cast<std::uint16_t>(bits >> 16);
  }
  return halves;
}

Operands random_operands(const MatmulShape& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0F, 1.0F);
  Operands o;
  // As long as the strides reach: a block of a wider matrix has the whole matrix's strides.
  o.a.resize(static_cast<std::size_t>((s.m - 1) * s.a_row_stride + (s.k - 1) * s.a_col_stride + 1));
  o.b.resize(static_cast<std::size_t>((s.k - 1) * s.b_row_stride + (s.n - 1) * s.b_col_stride + 1));
  o.bias.resize(static_cast<std::size_t>(s.n));
  o.c.assign(static_cast<std::size_t>(s.m * s.n), std::nanf(""));  // poisoned: every element must be written
  for (auto* v : {&o.a, &o.b, &o.bias}) {
    for (float& x : *v) x = u(rng);
  }
  return o;
}

// c[i][j] = sum_p a(i, p) b(p, j) (+ bias[j]) (then ReLU), in double, through the shape's strides.
std::vector<double> naive_product(const MatmulShape& s, const Operands& o, bool bias, bool relu) {
  std::vector<double> c(static_cast<std::size_t>(s.m * s.n));
  for (std::int64_t i = 0; i < s.m; ++i) {
    for (std::int64_t j = 0; j < s.n; ++j) {
      double sum = bias ? o.bias[static_cast<std::size_t>(j)] : 0.0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        sum += static_cast<double>(o.a[static_cast<std::size_t>(i * s.a_row_stride + p * s.a_col_stride)]) *
               o.b[static_cast<std::size_t>(p * s.b_row_stride + j * s.b_col_stride)];
      }
      c[static_cast<std::size_t>(i * s.n + j)] = relu ? std::max(sum, 0.0) : sum;
    }
  }
  return c;
}

// An fp32 sum of k terms of magnitude <= 1 in any order is within k * 2^-24 * sum|terms| of the exact one;
// sum|terms| <= k. Bound: 2 k^2 2^-24 (k = 96: 1.1e-3), against a wrong stride's or post-op's errors of ~1.
double tolerance(std::int64_t k) { return 2.0 * static_cast<double>(k * k) * std::ldexp(1.0, -24); }

TEST(DnnlMatmul, EachProductOfALayerMatchesANaiveLoop) {
  set_cpu_threads(2);
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::test_seed()));
  constexpr std::int64_t rows = 37, in = 96, out = 53;
  struct Form {
    const char* name;
    MatmulShape shape;
    bool bias, relu;
  };
  const Form forms[] = {{"forward", forward_product(rows, in, out), false, false},
                        {"forward + bias + ReLU", forward_product(rows, in, out), true, true},
                        {"input gradient", input_grad_product(rows, in, out), false, false},
                        {"weight gradient", weight_grad_product(rows, in, out), false, false}};
  for (const Form& f : forms) {
    Operands o = random_operands(f.shape, rng);
    DnnlMatmul(f.shape, MatmulInput::kF32, f.bias, f.relu).run(o.a.data(), o.b.data(), o.bias.data(), o.c.data());
    const auto expected = naive_product(f.shape, o, f.bias, f.relu);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(o.c[i], expected[i], tolerance(f.shape.k)) << f.name << ", element " << i;
    }
  }
}

TEST(DnnlMatmul, AnAccumulatingProductAddsToTheOutput) {
  set_cpu_threads(2);
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::test_seed()));
  const MatmulShape s = weight_grad_product(40, 30, 20);
  Operands o = random_operands(s, rng);
  const std::vector<float> before(o.c.size(), 0.5F);
  o.c = before;
  DnnlMatmul(s, MatmulInput::kF32, false, false, true).run(o.a.data(), o.b.data(), nullptr, o.c.data());
  const auto product = naive_product(s, o, false, false);
  for (std::size_t i = 0; i < product.size(); ++i) ASSERT_NEAR(o.c[i], 0.5 + product[i], tolerance(s.k)) << i;
}

// A thread's blocked signals, read from /proc: "SigBlk:" in hex.
unsigned long long blocked_signals_of(const std::string& task) {
  std::ifstream status("/proc/self/task/" + task + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  ADD_FAILURE() << "no SigBlk for task " << task;
  return 0;
}

// Every thread of the process and its blocked signals.
std::map<std::string, unsigned long long> blocked_signals_of_every_thread() {
  std::map<std::string, unsigned long long> masks;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const std::string id = task.path().filename().string();
    masks[id] = blocked_signals_of(id);
  }
  return masks;
}

// A shield blocks the signals on its thread and every worker of its team, and leaves each as it was: workers keep
// no mask of the library's after it (a profiler samples them, a signal sent to one is taken).
TEST(JitSignalShield, BlocksTheTeamWhileItLivesAndLeavesItAsItWas) {
  set_cpu_threads(4);
  const Tensor x = Tensor::zeros({512, 512}, DType::kF32), y = Tensor::zeros({512, 512}, DType::kF32);
  ops::activation_forward(Activation::kReLU, x, y);  // a loop of the library's own: the team's workers exist
  const auto before = blocked_signals_of_every_thread();
  ASSERT_GE(before.size(), 4u);
  const unsigned long long usr1 = 1ULL << (SIGUSR1 - 1);
  {
    const JitSignalShield shield;
    int blocked_workers = 0;
    for (const auto& [task, mask] : blocked_signals_of_every_thread()) blocked_workers += (mask & usr1) != 0 ? 1 : 0;
    EXPECT_GE(blocked_workers, 4) << "the calling thread and its team's three workers";
  }
  EXPECT_EQ(blocked_signals_of_every_thread(), before);
}

// The products of a 784-512 layer at batch 128 as the step runs them: its weight gradient a block of 256 rows
// at a time (A a strided block of dZ, which oneDNN 2.6 runs by its JIT GEMM: the kernel that moves rsp), the
// input gradient's blocks accumulating, and a bf16 forward; each with its result of a quiet run.
struct StormProducts {
  std::vector<DnnlMatmul> plans;
  std::vector<MatmulInput> inputs;
  std::vector<Operands> operands;
  std::vector<std::vector<float>> quiet;

  explicit StormProducts(std::mt19937& rng) {
    MatmulShape weight_grad_block = weight_grad_product(128, 784, 512);
    weight_grad_block.m = 256;
    MatmulShape input_grad_block = input_grad_product(128, 784, 512);
    input_grad_block.k = 256;
    add(weight_grad_block, MatmulInput::kF32, false, rng);
    add(input_grad_block, MatmulInput::kF32, true, rng);
    add(forward_product(128, 784, 512), MatmulInput::kF32, false, rng);
    if (cpu_has_native_bf16()) add(forward_product(128, 784, 512), MatmulInput::kBF16, false, rng);
  }
  void add(const MatmulShape& shape, MatmulInput input, bool accumulate, std::mt19937& rng) {
    plans.emplace_back(shape, input, false, false, accumulate);
    inputs.push_back(input);
    operands.push_back(random_operands(shape, rng));
    Operands& o = operands.back();
    o.a16 = upper_halves(o.a);
    o.b16 = upper_halves(o.b);
    quiet.push_back(run(plans.size() - 1));
  }
  std::vector<float> run(std::size_t i) {
    Operands& o = operands[i];
    std::fill(o.c.begin(), o.c.end(), 0.0F);
    plans[i].run(o.a_data(inputs[i]), o.b_data(inputs[i]), nullptr, o.c.data());
    return o.c;
  }
};

// A program that embeds the library and handles a frequent signal (a timer's SIGALRM, a profiler's SIGPROF)
// while products run. Unshielded, this aborted in free() or crashed within a second or two (heap metadata
// overwritten by the handler's frame); shielded, every product equals its quiet result bit for bit and the
// handler still runs. First the thread count drops and rises again with loops of the library's own in between:
// libgomp then ends the team's surplus workers and starts new ones, which a shield that blocked the workers
// only once left unblocked (a review's finding: 5 crashes in 5).
TEST(JitSignalShield, ProductsUnderAStormOfSignalsLeaveTheHeapAndTheResultsIntact) {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::test_seed()));
  set_cpu_threads(4);
  StormProducts products(rng);
  const Tensor x = Tensor::zeros({512, 512}, DType::kF32), y = Tensor::zeros({512, 512}, DType::kF32);
  set_cpu_threads(2);
  ops::activation_forward(Activation::kReLU, x, y);  // a loop of the library's own, on 2 threads
  set_cpu_threads(4);
  ops::activation_forward(Activation::kReLU, x, y);  // and on 4: new workers

  const test::SignalStorm storm;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  long rounds = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (std::size_t i = 0; i < products.plans.size(); ++i) {
      const std::vector<float> c = products.run(i);
      ASSERT_EQ(std::memcmp(c.data(), products.quiet[i].data(), c.size() * sizeof(float)), 0) << "product " << i;
      std::vector<std::vector<char>> churn(64, std::vector<char>(1000));  // the allocator walks its lists
    }
    ++rounds;
  }
  EXPECT_GT(rounds, 2);
  EXPECT_GT(test::SignalStorm::signals_handled(), 100) << "the signals did not arrive: the test proves nothing";
}

}  // namespace
}  // namespace sprintnet::cpu
