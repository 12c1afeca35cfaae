// Kernel lab: the exchange skeleton of the rows structure in quads (docs/FUSED.md, "Not built: the rows
// structure at 256 wide"), measured before the kernel is written, as grid_barrier_probe measured the
// split kernel's stages first.
//
// The design: one cluster of 16 blocks as 4 quads. Block b = 4q + j owns rows 32q..32q+31 of the batch
// and neuron quarter j (64 of 256) of every hidden layer (its rows of W: 32 KB bf16 a layer), and the
// first layer's part (feature group q) x (neuron quarter j). A step of L hidden layers exchanges 2L + 1
// times, each an all-to-all inside a group of 4 blocks by st.async into the receivers' shared memory,
// completing on their mbarriers:
//   X1        cross-quad  the first layer's partial sums [32 rows x 64] to the rows' owners (fp32: 8 KB a
//                         partner; bf16 halves it)
//   gather    in-quad     after each hidden forward: the block's 64 columns of the activation [32 x 64]
//                         bf16 (4 KB) to its quad, which needs all 256 for the next layer (L of them,
//                         the last feeding the logits)
//   scatter   in-quad     after each hidden backward but the first layer's: the input gradient's partial
//                         sums [32 x 64] to the quarter's owner (fp32 8 KB; L - 1 of them)
//   G1        cross-quad  the first layer's gradient [32 x 64] bf16 (4 KB) to the blocks holding the same
//                         neuron quarter, which need all 128 rows for its weight gradient
// The hidden layers' weight gradients (64 x 64 tiles) go beside the path, as the rows kernel's tiles do,
// and are not modelled here except as products after the last exchange.
//
// What it measures (µs a step, block 0's clock): the chain of exchanges alone; the same with products
// of the step's size between them (mma.sync on register operands, per warp: the first layer's 104 before
// X1, 32 for each hidden forward and backward product, 16 for the logits, 104 for the first layer's
// weight gradient and 32 a hidden tile after G1: the design's arithmetic on 8 warps); a chain of plain
// cluster barriers of the same length (the floor of any exchange); the partials in bf16; and each
// exchange pipelined with the products before it (sent in 2 or 4 pieces, each as soon as its share of
// the products is done: the receiver's wait then overlaps the sender's last products). Each
// exchange's data is checked on every step (sender, exchange and piece in every word), so a probe
// that moved nothing cannot pass (every step: a word of another step is a race). Standalone:
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -Isrc bench/lab/quad_exchange_probe.cu -o quad_exchange_probe
//   ./quad_exchange_probe [launches, 5]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check_cuda.h"
#include "sprintnet/ops/cuda/fused/ptx.cuh"

namespace ptx = sprintnet::cuda::ptx;

constexpr int kBlocks = 16, kThreads = 256, kMaxExchanges = 7, kSteps = 468, kSmem = 200 * 1024;

struct Exchange {
  int cross;       // 1: among the blocks of the same neuron quarter (4q' + j); 0: inside the quad (4q + j')
  int bytes;       // sent to each of the 3 partners (a multiple of 16)
  int mma_before;  // products a warp runs before it sends
  int chunks;      // 1, or the products and the sends interleaved in this many pieces (pipelined)
};
struct Params {
  Exchange ex[kMaxExchanges];
  int area[kMaxExchanges];         // each exchange's [3][bytes] receive area (shared-memory offsets)
  int count;                       // exchanges a step; 0 with barriers > 0: a chain of cluster barriers
  int barriers;                    // cluster barriers a step (the reference chain)
  int mma_after;                   // products a warp runs after the last exchange
  int steps;
  unsigned long long* stamps;      // [steps][count + 1]: block 0's clock after each exchange, or null
  unsigned* errors;                // words received wrong on the first step
  float* sink;                     // keeps the products alive
};

__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// `count` mma.sync a warp in four independent chains (the products' issue, not their data).
__device__ __forceinline__ void products(int count, float (&acc)[4][4], const std::uint32_t (&a)[4],
                                         const std::uint32_t (&b)[2]) {
  for (int i = 0; i + 4 <= count; i += 4) {
#pragma unroll
    for (int c = 0; c < 4; ++c) ptx::mma_bf16(acc[c], a, b);
  }
  for (int c = 0; c < count % 4; ++c) ptx::mma_bf16(acc[c], a, b);
}

// The partners of block `rank` in an exchange (3 of them), and the slot a sender's data takes in its
// receiver: its index among the receiver's partners.
__device__ __forceinline__ int partner(int rank, int cross, int k) {
  const int q = rank >> 2, j = rank & 3;
  if (cross) {
    const int other = k < q ? k : k + 1;
    return 4 * other + j;
  }
  const int other = k < j ? k : k + 1;
  return 4 * q + other;
}
__device__ __forceinline__ int slot_of(int receiver, int sender, int cross) {
  const int mine = cross ? receiver >> 2 : receiver & 3, theirs = cross ? sender >> 2 : sender & 3;
  return theirs < mine ? theirs : theirs - 1;
}

__global__ void __cluster_dims__(kBlocks, 1, 1) __launch_bounds__(kThreads, 1)
    quad_exchange(const __grid_constant__ Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned rank_u;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank_u));
  const int rank = static_cast<int>(rank_u), t = static_cast<int>(threadIdx.x);
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(smem);  // one a exchange
  if (t == 0) {
    for (int e = 0; e < kMaxExchanges; ++e) ptx::mbarrier_init(ptx::shared_address(bars + e));
    ptx::fence_mbarrier_init();
  }
  ptx::cluster_arrive();
  ptx::cluster_wait();

  float acc[4][4] = {};
  const std::uint32_t a[4] = {0x3f803f80u ^ static_cast<unsigned>(t), 0x3f803f80u, 0x3f803f80u, 0x3f803f80u};
  const std::uint32_t b[2] = {0x3c003c00u, 0x3c003c00u};
  unsigned errors = 0, seen = 0;
  std::uint32_t phases = 0;
  for (int step = 0; step < p.steps; ++step) {
    if (p.count == 0) {  // a chain of cluster barriers, or the products alone
      for (int i = 0; i < p.barriers; ++i) {
        ptx::cluster_arrive();
        ptx::cluster_wait();
      }
      products(p.mma_after, acc, a, b);
      if (p.stamps != nullptr && rank == 0 && t == 0) p.stamps[step] = now();
      continue;
    }
    for (int e = 0; e < p.count; ++e) {
      const Exchange x = p.ex[e];
      const int pieces = x.bytes / 16, chunks = x.chunks > 1 ? x.chunks : 1;
      // Products, then this block's pieces to each partner's area, slot of this block (every word says who
      // sent it); in `chunks` rounds, each sending what its share of the products made.
      for (int c = 0; c < chunks; ++c) {
        products(x.mma_before / chunks, acc, a, b);
        // The chunk's (partner, piece) pairs spread over all the threads (one round sends every piece
        // of every partner: the same stores, in the same order a thread, as a loop over partners).
        const int first = pieces * c / chunks, span = pieces * (c + 1) / chunks - first;
        for (int w = t; w < 3 * span; w += kThreads) {
          const int k = w / span, i = first + w % span, to = partner(rank, x.cross, k);
          const std::uint32_t bar = ptx::in_block(ptx::shared_address(bars + e), to);
          const std::uint32_t base =
              ptx::in_block(ptx::shared_address(smem + p.area[e] + slot_of(to, rank, x.cross) * x.bytes), to);
          const uint4 v = make_uint4(static_cast<unsigned>(rank), static_cast<unsigned>(e), static_cast<unsigned>(i),
                                     static_cast<unsigned>(step));
          ptx::store_to_block(base + 16 * i, v, bar);
        }
      }
      // Receive: the three partners' bytes, then read them (the consumer's sum).
      if (t == 0) ptx::mbarrier_expect_bytes(ptx::shared_address(bars + e), 3 * x.bytes);
      ptx::mbarrier_wait_cluster(ptx::shared_address(bars + e), (phases >> e) & 1u);
      phases ^= 1u << e;
      for (int k = 0; k < 3; ++k) {
        const int from = partner(rank, x.cross, k);
        const uint4* in = reinterpret_cast<const uint4*>(smem + p.area[e] + slot_of(rank, from, x.cross) * x.bytes);
        for (int i = t; i < pieces; i += kThreads) {
          const uint4 v = in[i];
          seen += v.x + v.y + v.z;
          if (v.x != static_cast<unsigned>(from) || v.y != static_cast<unsigned>(e) || v.z != static_cast<unsigned>(i) ||
              v.w != static_cast<unsigned>(step)) {
            ++errors;
          }
        }
      }
      if (p.stamps != nullptr && rank == 0 && t == 0) p.stamps[step * (p.count + 1) + e] = now();
    }
    products(p.mma_after, acc, a, b);
    if (p.stamps != nullptr && rank == 0 && t == 0) p.stamps[step * (p.count + 1) + p.count] = now();
  }
  // No block leaves while another may still store into it.
  ptx::cluster_arrive();
  ptx::cluster_wait();
  if (errors != 0) atomicAdd(p.errors, errors);
  float sum = static_cast<float>(seen & 1u);
  for (auto& c : acc) sum += c[0] + c[1] + c[2] + c[3];
  p.sink[rank * kThreads + t] = sum;
}

// ---- host
struct Variant {
  std::string name;
  std::vector<Exchange> ex;
  int barriers = 0, mma_after = 0;
};

// The chain of a step with `hidden` hidden layers; `work`: the products between the exchanges;
// `partial_bytes`: 8192 (fp32 partial sums) or 4096 (bf16).
Variant chain(int hidden, bool work, int partial_bytes, int chunks = 1) {
  Variant v;
  v.name = std::to_string(hidden) + " hidden, " + (work ? "with products" : "exchanges alone") +
           (partial_bytes == 4096 ? ", partials bf16" : "") +
           (chunks > 1 ? ", pipelined x" + std::to_string(chunks) : "");
  v.ex.push_back({1, partial_bytes, work ? 104 : 0, chunks});                                 // X1
  for (int l = 0; l < hidden; ++l) v.ex.push_back({0, 4096, work && l > 0 ? 32 : 0, chunks});  // gathers
  for (int l = 0; l < hidden - 1; ++l) {
    v.ex.push_back({0, partial_bytes, work ? (l == 0 ? 16 + 32 : 32) : 0, chunks});            // scatters
  }
  v.ex.push_back({1, 4096, 0, 1});  // G1
  v.mma_after = work ? 104 + 32 * (hidden - 1) : 0;
  return v;
}

int main(int argc, char** argv) {
  const int launches = std::max(2, argc > 1 ? std::atoi(argv[1]) : 5);  // the first warms up
  int device = 0;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s\n", prop.name);
  CHECK_CUDA(cudaFuncSetAttribute(quad_exchange, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK_CUDA(cudaFuncSetAttribute(quad_exchange, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  unsigned long long* d_stamps;
  unsigned* d_errors;
  float* d_sink;
  CHECK_CUDA(cudaMalloc(&d_stamps, sizeof(unsigned long long) * kSteps * (kMaxExchanges + 1)));
  CHECK_CUDA(cudaMalloc(&d_errors, sizeof(unsigned)));
  CHECK_CUDA(cudaMalloc(&d_sink, sizeof(float) * kBlocks * kThreads));

  std::vector<Variant> variants;
  for (const int barriers : {5, 7}) {
    Variant v;
    v.name = std::to_string(barriers) + " cluster barriers (no data)";
    v.barriers = barriers;
    variants.push_back(v);
  }
  for (const int hidden : {2, 3}) {
    variants.push_back(chain(hidden, false, 8192));
    variants.push_back(chain(hidden, false, 4096));
    variants.push_back(chain(hidden, true, 8192));
    variants.push_back(chain(hidden, true, 4096));
    variants.push_back(chain(hidden, true, 4096, 2));
    variants.push_back(chain(hidden, true, 4096, 4));
  }
  {
    Variant v = chain(3, true, 8192);  // the products alone: the arithmetic's own time
    v.name = "3 hidden, products alone (no exchange)";
    for (const Exchange& x : v.ex) v.mma_after += x.mma_before;
    v.ex.clear();
    variants.push_back(v);
  }

  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  bool all_ok = true;
  for (const Variant& v : variants) {
    Params p{};
    p.count = static_cast<int>(v.ex.size());
    int offset = 128;  // after the mbarriers
    for (int e = 0; e < p.count; ++e) {
      p.ex[e] = v.ex[static_cast<std::size_t>(e)];
      p.area[e] = offset;
      offset += 3 * p.ex[e].bytes;
    }
    if (offset > kSmem) {
      std::fprintf(stderr, "%s: %d bytes of receive areas exceed the block's %d\n", v.name.c_str(), offset, kSmem);
      return 1;
    }
    p.barriers = v.barriers;
    p.mma_after = v.mma_after;
    p.steps = kSteps;
    p.errors = d_errors;
    p.sink = d_sink;
    CHECK_CUDA(cudaMemset(d_errors, 0, sizeof(unsigned)));
    std::vector<float> ms;
    for (int l = 0; l <= launches; ++l) {
      p.stamps = l == launches ? d_stamps : nullptr;  // the last launch stamps, the others are timed
      CHECK_CUDA(cudaEventRecord(start));
      quad_exchange<<<kBlocks, kThreads, kSmem>>>(p);
      CHECK_CUDA(cudaGetLastError());
      CHECK_CUDA(cudaEventRecord(stop));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
      if (l > 0 && l < launches) ms.push_back(t);  // the first launch warms up
    }
    unsigned errors = 0;
    CHECK_CUDA(cudaMemcpy(&errors, d_errors, sizeof(unsigned), cudaMemcpyDeviceToHost));
    std::sort(ms.begin(), ms.end());
    const float median = ms.empty() ? 0.0f : ms[ms.size() / 2];
    std::printf("%-58s %7.3f ms an epoch (%d steps), %6.2f us a step, %s", v.name.c_str(), median, kSteps,
                1000.0f * median / kSteps, errors == 0 ? "data ok" : "DATA WRONG");
    if (errors != 0) std::printf(" (%u words)", errors);
    all_ok = all_ok && errors == 0;
    // Block 0's time in each exchange (from the previous stamp), medians over steps 10..kSteps-1.
    if (p.count > 0) {
      const int per = p.count + 1;
      std::vector<unsigned long long> stamps(static_cast<std::size_t>(kSteps) * per);
      CHECK_CUDA(cudaMemcpy(stamps.data(), d_stamps, stamps.size() * sizeof(unsigned long long),
                            cudaMemcpyDeviceToHost));
      std::printf("; block 0 (us):");
      for (int e = 0; e < per; ++e) {
        std::vector<double> d;
        for (int s = 10; s < kSteps; ++s) {
          const unsigned long long prev = e == 0 ? stamps[static_cast<std::size_t>((s - 1) * per + per - 1)]
                                                 : stamps[static_cast<std::size_t>(s * per + e - 1)];
          d.push_back(static_cast<double>(stamps[static_cast<std::size_t>(s * per + e)] - prev) / 1000.0);
        }
        std::sort(d.begin(), d.end());
        std::printf(" %s%.2f", e == p.count ? "after " : "", d[d.size() / 2]);
      }
    }
    std::printf("\n");
  }
  std::printf("%s\n", all_ok ? "every exchange delivered what was sent" : "SOME EXCHANGES DELIVERED WRONG DATA");
  return all_ok ? 0 : 1;
}
