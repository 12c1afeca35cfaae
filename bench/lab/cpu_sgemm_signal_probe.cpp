// dnnl_sgemm under a storm of SIGUSR1 without a JitSignalShield: does the heap survive? (tests/ops/gemm_test.cpp's
// premise). Build: g++ -O2 -fopenmp cpu_sgemm_signal_probe.cpp -ldnnl -lpthread. H200 host (Xeon): 5 aborts in 5;
// the 2-core AMD EPYC dev machine: 0 in 5 (2026-11-29).
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <signal.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
std::atomic<long> handled{0};
void count(int) { volatile char frame[512]; frame[0] = 1; frame[511] = frame[0]; handled++; }
int main() {
  omp_set_num_threads(2);
  struct sigaction a = {}; a.sa_handler = count; sigemptyset(&a.sa_mask); sigaction(SIGUSR1, &a, nullptr);
  const long m = 192, n = 256, k = 320;
  std::vector<float> A(k * m * 2, 0.5f), B(k * n * 2, 0.25f), C(m * n), Q(m * n);
  for (size_t i = 0; i < A.size(); ++i) A[i] = (i % 17) * 0.1f; for (size_t i = 0; i < B.size(); ++i) B[i] = (i % 13) * 0.1f;
  dnnl_sgemm('N', 'T', m, n, k, 1.f, A.data(), k, B.data(), k, 0.f, Q.data(), n);
  std::atomic<bool> done{false};
  std::thread sender([&] { sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR1); pthread_sigmask(SIG_BLOCK, &s, nullptr);
    while (!done) { kill(getpid(), SIGUSR1); std::this_thread::sleep_for(std::chrono::microseconds(50)); } });
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2); long rounds = 0, bad = 0;
  while (std::chrono::steady_clock::now() < end) {
    dnnl_sgemm('N', 'T', m, n, k, 1.f, A.data(), k, B.data(), k, 0.f, C.data(), n);
    if (std::memcmp(C.data(), Q.data(), C.size() * 4) != 0) ++bad;
    std::vector<std::vector<char>> churn(64, std::vector<char>(1000));
    ++rounds;
  }
  done = true; sender.join();
  std::printf("rounds %ld, wrong %ld, signals %ld\n", rounds, bad, handled.load());
}
