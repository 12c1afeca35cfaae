// The compiled CPU step's oneDNN products (ops/cpu/dnnl_matmul.h): each product form against a naive loop
// in double, and the products under a stream of signals whose handler runs on the computing thread, which
// corrupted the heap before JitSignalShield (ops/cpu/jit_signal_shield.h).
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dnnl_matmul.h"
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

std::atomic<long> signals_handled{0};

void count_signal(int) {
  volatile char frame[512];  // a frame of some size, as a real handler's
  frame[0] = 1;
  frame[511] = frame[0];
  signals_handled.fetch_add(1, std::memory_order_relaxed);
}

// A program that embeds the library and handles a frequent signal (a timer's SIGALRM, a profiler's SIGPROF)
// while the CPU step runs. Sent to the process, a signal goes to the main thread first, which runs the
// products here. Unshielded, this aborted in free() within a second or two (heap metadata overwritten by the
// handler's frame); shielded, every product equals its quiet result bit for bit and the handler still runs.
TEST(DnnlMatmul, SignalsDuringProductsLeaveTheHeapAndTheResultsIntact) {
  set_cpu_threads(2);
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::test_seed()));
  // The products of a 784-512 layer at batch 128 as the step runs them: its weight gradient a block of 256
  // rows at a time (A a strided block of dZ, which oneDNN 2.6 runs by its JIT GEMM: the kernel that moves rsp),
  // the input gradient's blocks accumulating, and a bf16 forward.
  struct Product {
    MatmulShape shape;
    MatmulInput input;
    bool accumulate;
  };
  MatmulShape weight_grad_block = weight_grad_product(128, 784, 512);
  weight_grad_block.m = 256;
  MatmulShape input_grad_block = input_grad_product(128, 784, 512);
  input_grad_block.k = 256;
  std::vector<Product> products = {{forward_product(128, 784, 512), MatmulInput::kF32, false},
                                   {weight_grad_block, MatmulInput::kF32, false},
                                   {input_grad_block, MatmulInput::kF32, true}};
  if (cpu_has_native_bf16()) products.push_back({forward_product(128, 784, 512), MatmulInput::kBF16, false});
  std::vector<DnnlMatmul> plans;
  std::vector<Operands> operands;
  std::vector<std::vector<float>> quiet;
  for (const Product& p : products) {
    plans.emplace_back(p.shape, p.input, false, false, p.accumulate);
    operands.push_back(random_operands(p.shape, rng));
    Operands& o = operands.back();
    o.a16 = upper_halves(o.a);
    o.b16 = upper_halves(o.b);
    std::fill(o.c.begin(), o.c.end(), 0.0F);
    plans.back().run(o.a_data(p.input), o.b_data(p.input), nullptr, o.c.data());
    quiet.push_back(o.c);
  }

  struct sigaction action = {}, previous = {};
  action.sa_handler = count_signal;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);
  signals_handled = 0;
  std::atomic<bool> done{false};
  std::thread sender([&done] {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);  // to the process, taken by the computing threads
    while (!done.load()) {
      kill(getpid(), SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  long rounds = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (std::size_t i = 0; i < plans.size(); ++i) {
      Operands& o = operands[i];
      std::fill(o.c.begin(), o.c.end(), 0.0F);
      plans[i].run(o.a_data(products[i].input), o.b_data(products[i].input), nullptr, o.c.data());
      ASSERT_EQ(std::memcmp(o.c.data(), quiet[i].data(), o.c.size() * sizeof(float)), 0) << "product " << i;
      std::vector<std::vector<char>> churn(64, std::vector<char>(1000));  // the allocator walks its lists
    }
    ++rounds;
  }
  done = true;
  sender.join();
  sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_GT(rounds, 2);
  EXPECT_GT(signals_handled.load(), 100) << "the signals did not arrive: the test proves nothing";
}

}  // namespace
}  // namespace sprintnet::cpu
