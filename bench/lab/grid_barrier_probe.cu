// The kernel lab's probe of the split kernel's grid barrier (docs/FUSED.md, v17): what one barrier
// costs by its mechanism alone, and inside a stage's skeleton (each block stores its 8 columns of a
// 128-row bf16 activation, the barrier, then it loads its rank's 128 x range slice of it from L2 by
// cp.async; two activations in turn, so one barrier an iteration suffices, as a layer's), on the split
// kernel's grids: 98 blocks in clusters of 7 (784 wide, 112-column slices) and 32 in clusters of 4 (256 wide, 64 columns), 256 threads and 200 KB of shared memory a block.
// Barriers (one monotonic counter unless said):
//   0 release   the engine's (grid_barrier.cuh): block barrier, thread 0's red.release.gpu, its
//               spin on ld.acquire.gpu, block barrier
//   1 relaxed   the same arrival; the spin on relaxed loads, one fence.acq_rel.gpu after it
//   2 cluster   the cluster's blocks meet at a cluster barrier first (arrive.release / wait.acquire),
//               rank 0 alone adds to the counter (a cluster's count), spins as 1, and a second
//               cluster barrier hands the result to its ranks
//   3 flags     thread 0 stores the barrier's number into its block's own flag (st.release.gpu);
//               warp 0 polls every block's flag (relaxed loads, a few a lane), then one fence
// Then the slice's load behind barrier 0, with and without the stores in front of it: by cp.async
// (the engine's), by one bulk copy a row (the TMA engine), by 16-byte loads into registers; and no
// barrier at all: every 8-byte word tagged with the iteration that wrote it, read until every word has
// its tag (tagged_probe). Each is checked: a block reads what every other block stored before the
// barrier (the skeleton's slice) and counts mismatches. Standalone on purpose:
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 bench/lab/grid_barrier_probe.cu -o grid_barrier_probe
//   ./grid_barrier_probe [iterations]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check_cuda.h"

constexpr int kThreads = 256, kRows = 128, kSmem = 200 * 1024, kMaxBlocks = 128;

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void fence_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
}

struct Params {
  unsigned* counter;
  unsigned* flags;          // [kMaxBlocks]
  unsigned short* x[2];     // [kRows][width]: the activation, 8 columns a block (iterations alternate)
  int* mismatches;
  int iterations, width, cluster, skeleton, store;
};

template <int kVariant>
struct Barrier {
  const Params& p;
  unsigned n = 0;  // barriers passed
  __device__ explicit Barrier(const Params& params) : p(params) {}
  __device__ void sync() {
    ++n;
    if constexpr (kVariant == 0) {
      __syncthreads();
      if (threadIdx.x == 0) {
        red_release(p.counter, 1u);
        while (ld_acquire(p.counter) < n * gridDim.x) {
        }
      }
      __syncthreads();
    } else if constexpr (kVariant == 1) {
      __syncthreads();
      if (threadIdx.x == 0) {
        red_release(p.counter, 1u);
        while (ld_relaxed(p.counter) < n * gridDim.x) {
        }
        fence_gpu();
      }
      __syncthreads();
    } else if constexpr (kVariant == 2) {
      cluster_sync();
      if (cluster_rank() == 0) {
        if (threadIdx.x == 0) {
          red_release(p.counter, 1u);
          while (ld_relaxed(p.counter) < n * (gridDim.x / p.cluster)) {
          }
          fence_gpu();
        }
        __syncthreads();
      }
      cluster_sync();
    } else {
      __syncthreads();
      if (threadIdx.x == 0) st_release(p.flags + blockIdx.x, n);
      if (threadIdx.x < 32) {
        bool done;
        do {
          bool mine = true;
          for (unsigned b = threadIdx.x; b < gridDim.x; b += 32) mine = mine && ld_relaxed(p.flags + b) >= n;
          done = __all_sync(0xffffffffu, mine);
        } while (!done);
        fence_gpu();
      }
      __syncthreads();
    }
  }
};

__device__ __forceinline__ void mbarrier_init(unsigned bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void expect_bytes(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void wait_phase(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n wait:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_from_global(unsigned to, const void* from, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(to),
               "l"(from), "r"(bytes), "r"(bar)
               : "memory");
}

// kLoad: how the slice comes in after the barrier: 0 not at all, 1 cp.async of 16 bytes a thread at a
// time (the split kernel's load_slice), 2 one bulk copy a row (the TMA engine, on an mbarrier),
// 3 16-byte loads into registers, then shared stores.
template <int kVariant, int kLoad>
__global__ void __launch_bounds__(kThreads, 1) probe(const __grid_constant__ Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  Barrier<kVariant> barrier(p);
  const int range = p.width / p.cluster, rank = static_cast<int>(blockIdx.x) % p.cluster;
  auto* slice = reinterpret_cast<unsigned short*>(smem);
  auto* bar = reinterpret_cast<unsigned long long*>(smem + kSmem - 64);
  const unsigned bar_at = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  if (threadIdx.x == 0) mbarrier_init(bar_at);
  __syncthreads();
  unsigned phase = 0;
  int bad = 0;
  for (int it = 0; it < p.iterations; ++it) {
    if (p.skeleton && p.store) {
      // The block's 8 columns of every row: the value says who wrote it in which iteration.
      const int row = static_cast<int>(threadIdx.x) >> 1, half = static_cast<int>(threadIdx.x) & 1;
      const unsigned short v = static_cast<unsigned short>((it * 131 + blockIdx.x) & 0xffff);
      const uint2 four = make_uint2(v | (v << 16), v | (v << 16));
      *reinterpret_cast<uint2*>(p.x[it & 1] + row * p.width + blockIdx.x * 8 + 4 * half) = four;
    }
    barrier.sync();
    if (p.skeleton && kLoad != 0) {
      // The rank's slice: 128 rows x range columns, row-major.
      const unsigned short* from = p.x[it & 1] + rank * range;
      const int pieces = kRows * range / 8;
      if constexpr (kLoad == 1) {
        for (int q = static_cast<int>(threadIdx.x); q < pieces; q += kThreads) {
          const int row = q / (range / 8), j = q % (range / 8);
          cp16(slice + row * range + j * 8, from + row * p.width + j * 8);
        }
        asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
        __syncthreads();
      } else if constexpr (kLoad == 2) {
        if (threadIdx.x == 0) expect_bytes(bar_at, kRows * range * 2);
        __syncthreads();  // the expectation before any copy completes
        if (threadIdx.x < kRows) {
          asm volatile("fence.proxy.async.global;" ::: "memory");  // generic writes, read by the async proxy
          const int row = static_cast<int>(threadIdx.x);
          bulk_from_global(static_cast<unsigned>(__cvta_generic_to_shared(slice + row * range)), from + row * p.width,
                           range * 2, bar_at);
        }
        wait_phase(bar_at, phase);
        phase ^= 1u;
      } else {
        uint4 v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int q = static_cast<int>(threadIdx.x) + u * kThreads;
          if (q < pieces) {
            const int row = q / (range / 8), j = q % (range / 8);
            v[u] = __ldcg(reinterpret_cast<const uint4*>(from + row * p.width + j * 8));
          }
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int q = static_cast<int>(threadIdx.x) + u * kThreads;
          if (q < pieces) {
            const int row = q / (range / 8), j = q % (range / 8);
            *reinterpret_cast<uint4*>(slice + row * range + j * 8) = v[u];
          }
        }
        __syncthreads();
      }
      if (p.store && it % 64 == 0) {  // check a few: column j of the slice was written by block (rank range + j) / 8
        for (int q = static_cast<int>(threadIdx.x); q < kRows * range; q += kThreads) {
          const int col = rank * range + q % range;
          const unsigned short want = static_cast<unsigned short>((it * 131 + col / 8) & 0xffff);
          bad += slice[q] != want;
        }
      }
      __syncthreads();
    }
  }
  if (bad != 0) atomicAdd(p.mismatches, bad);
}

// No barrier at all: each 8-byte word carries a bf16 pair and the iteration that wrote it (a tag in its
// high half; an aligned 8-byte access is single-copy atomic, so a word with the right tag has the right
// data), and a block reads its slice until every word has its tag. Four buffers in turn: a block is never
// more than two iterations ahead of another (every slice depends on 14 blocks of every rank), so a word is
// not rewritten before its readers have it. kMode 0: cp.async of 16 bytes into shared memory, checked
// there, the stale pieces fetched again; kMode 1: relaxed 16-byte loads into registers, each piece spun on
// until fresh. Then the bf16 pairs compacted into the slice (the products' layout).
__device__ __forceinline__ void st_relaxed_v2(unsigned long long* p, unsigned long long a, unsigned long long b) {
  asm volatile("st.relaxed.gpu.global.v2.b64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ ulonglong2 ld_relaxed_v2(const unsigned long long* p) {
  ulonglong2 v;
  asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(v.x), "=l"(v.y) : "l"(p) : "memory");
  return v;
}

template <int kMode>
__global__ void __launch_bounds__(kThreads, 1) tagged_probe(const __grid_constant__ Params p,
                                                            unsigned long long* const* words) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int range = p.width / p.cluster, rank = static_cast<int>(blockIdx.x) % p.cluster;
  const int row_words = p.width / 2, range_words = range / 2, pieces = kRows * range_words / 2;
  auto* staged = reinterpret_cast<ulonglong2*>(smem);                         // [pieces] (kMode 0)
  auto* slice = reinterpret_cast<unsigned*>(smem + 64 * 1024);                // [128][range / 2] bf16 pairs
  int bad = 0;
  for (int it = 0; it < p.iterations && bad == 0; ++it) {
    unsigned long long* x = words[it & 3];
    const unsigned long long tag = static_cast<unsigned long long>(it + 1) << 32;
    {  // the block's 8 columns: 4 words a row, two a thread
      const int row = static_cast<int>(threadIdx.x) >> 1, pair = static_cast<int>(threadIdx.x) & 1;
      const unsigned v = static_cast<unsigned>((it * 131 + blockIdx.x) & 0xffff);
      const unsigned long long w = tag | (v | (v << 16));
      st_relaxed_v2(x + row * row_words + blockIdx.x * 4 + 2 * pair, w, w);
    }
    const unsigned long long* from = x + rank * range_words;
    const auto at = [&](int q) { return from + (q / (range_words / 2)) * row_words + (q % (range_words / 2)) * 2; };
    const auto fresh = [&](unsigned long long w) { return (w & 0xffffffff00000000ull) == tag; };
    const auto ahead = [&](unsigned long long w) { return (w >> 32) > static_cast<unsigned long long>(it + 1); };
    if constexpr (kMode == 0) {
      bool waiting = true;
      for (int spin = 0; waiting; ++spin) {
        for (int q = static_cast<int>(threadIdx.x); q < pieces; q += kThreads) {
          if (spin == 0 || !(fresh(staged[q].x) && fresh(staged[q].y))) cp16(staged + q, at(q));
        }
        asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
        waiting = false;
        for (int q = static_cast<int>(threadIdx.x); q < pieces; q += kThreads) {
          const ulonglong2 w = staged[q];
          if (ahead(w.x) || ahead(w.y) || spin > 1000000) ++bad;
          waiting = waiting || !(fresh(w.x) && fresh(w.y));
        }
        if (bad != 0) break;
      }
      for (int q = static_cast<int>(threadIdx.x); q < pieces; q += kThreads) {
        const ulonglong2 w = staged[q];
        *reinterpret_cast<uint2*>(slice + 2 * q) = make_uint2(static_cast<unsigned>(w.x), static_cast<unsigned>(w.y));
      }
    } else {
      constexpr int kMost = 14;
      ulonglong2 w[kMost];
#pragma unroll
      for (int u = 0; u < kMost; ++u) {
        const int q = static_cast<int>(threadIdx.x) + u * kThreads;
        if (q < pieces) w[u] = ld_relaxed_v2(at(q));
      }
#pragma unroll
      for (int u = 0; u < kMost; ++u) {
        const int q = static_cast<int>(threadIdx.x) + u * kThreads;
        if (q >= pieces) break;
        for (int spin = 0; !(fresh(w[u].x) && fresh(w[u].y)); ++spin) {
          if (ahead(w[u].x) || ahead(w[u].y) || spin > 1000000) {
            ++bad;
            break;
          }
          w[u] = ld_relaxed_v2(at(q));
        }
        *reinterpret_cast<uint2*>(slice + 2 * q) = make_uint2(static_cast<unsigned>(w[u].x), static_cast<unsigned>(w[u].y));
      }
    }
    __syncthreads();
    if (it % 64 == 0) {  // the data under the tags: column j of the slice was written by block (rank range + j) / 8
      const auto* values = reinterpret_cast<const unsigned short*>(slice);
      for (int q = static_cast<int>(threadIdx.x); q < kRows * range; q += kThreads) {
        const int col = rank * range + q % range;
        bad += values[q] != static_cast<unsigned short>((it * 131 + col / 8) & 0xffff);
      }
    }
    __syncthreads();
  }
  if (bad != 0) atomicAdd(p.mismatches, bad);
}

template <int kMode>
float run_tagged(Params p, unsigned long long* const* words, int blocks, int cluster) {
  auto kernel = tagged_probe<kMode>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmem;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = cluster;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start));
  CHECK_CUDA(cudaLaunchKernelEx(&config, kernel, p, words));
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

template <int kVariant, int kLoad = 1>
float run(Params p, int blocks, int cluster) {
  auto kernel = probe<kVariant, kLoad>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmem;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = cluster;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  CHECK_CUDA(cudaMemset(p.counter, 0, sizeof(unsigned)));
  CHECK_CUDA(cudaMemset(p.flags, 0, kMaxBlocks * sizeof(unsigned)));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start));
  CHECK_CUDA(cudaLaunchKernelEx(&config, kernel, p));
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  Params p{};
  CHECK_CUDA(cudaMalloc(&p.counter, sizeof(unsigned)));
  CHECK_CUDA(cudaMalloc(&p.flags, kMaxBlocks * sizeof(unsigned)));
  CHECK_CUDA(cudaMalloc(&p.x[0], kRows * 784 * sizeof(unsigned short)));
  CHECK_CUDA(cudaMalloc(&p.x[1], kRows * 784 * sizeof(unsigned short)));
  CHECK_CUDA(cudaMalloc(&p.mismatches, sizeof(int)));
  CHECK_CUDA(cudaMemset(p.mismatches, 0, sizeof(int)));
  const char* names[] = {"release", "relaxed", "cluster", "flags"};
  struct Grid { int width, cluster; } grids[] = {{784, 7}, {256, 4}};
  std::printf("grid barrier probe, %d iterations a launch; ns a barrier (alone) and a stage skeleton (store 8 "
              "columns, barrier, slice from L2); medians of 5 launches\n", iterations);
  for (const Grid& grid : grids) {
    const int blocks = grid.width / 8;
    p.width = grid.width;
    p.cluster = grid.cluster;
    for (int skeleton = 0; skeleton < 2; ++skeleton) {
      p.skeleton = skeleton;
      p.store = 1;
      p.iterations = skeleton ? iterations / 2 : iterations;
      for (int round = 0; round < 2; ++round) {
        for (int v = 0; v < 4; ++v) {
          std::vector<float> ms;
          for (int launch = 0; launch < 5; ++launch) {
            float t = 0.0f;
            switch (v) {
              case 0: t = run<0>(p, blocks, grid.cluster); break;
              case 1: t = run<1>(p, blocks, grid.cluster); break;
              case 2: t = run<2>(p, blocks, grid.cluster); break;
              default: t = run<3>(p, blocks, grid.cluster); break;
            }
            ms.push_back(t);
          }
          std::sort(ms.begin(), ms.end());
          const double per = ms[2] * 1e6 / p.iterations;
          std::printf("%d blocks (clusters of %d) %-8s %-9s round %d: %8.1f ns an iteration\n", blocks, grid.cluster,
                      names[v], skeleton ? "skeleton" : "alone", round, per);
        }
      }
    }
  }
  // The slice's load, behind the engine's barrier (release), with and without the stores before it.
  const char* loads[] = {"none", "cp.async", "bulk rows", "ld.global"};
  for (const Grid& grid : grids) {
    const int blocks = grid.width / 8;
    p.width = grid.width;
    p.cluster = grid.cluster;
    p.skeleton = 1;
    p.iterations = iterations / 2;
    for (int round = 0; round < 2; ++round) {
      for (int store = 0; store < 2; ++store) {
        p.store = store;
        for (int load = 0; load < 4; ++load) {
          std::vector<float> ms;
          for (int launch = 0; launch < 5; ++launch) {
            float t = 0.0f;
            switch (load) {
              case 0: t = run<0, 0>(p, blocks, grid.cluster); break;
              case 1: t = run<0, 1>(p, blocks, grid.cluster); break;
              case 2: t = run<0, 2>(p, blocks, grid.cluster); break;
              default: t = run<0, 3>(p, blocks, grid.cluster); break;
            }
            ms.push_back(t);
          }
          std::sort(ms.begin(), ms.end());
          std::printf("%d blocks (clusters of %d) stores %-3s slice by %-9s round %d: %8.1f ns an iteration\n", blocks,
                      grid.cluster, store ? "yes" : "no", loads[load], round, ms[2] * 1e6 / p.iterations);
        }
      }
    }
  }
  // The tagged words, no barrier: against the engine's skeleton above (release, cp.async).
  unsigned long long* words_host[4];
  for (auto& w : words_host) {
    CHECK_CUDA(cudaMalloc(&w, kRows * 784 * 4));
    CHECK_CUDA(cudaMemset(w, 0, kRows * 784 * 4));
  }
  unsigned long long** words = nullptr;
  CHECK_CUDA(cudaMalloc(&words, sizeof(words_host)));
  CHECK_CUDA(cudaMemcpy(words, words_host, sizeof(words_host), cudaMemcpyHostToDevice));
  for (const Grid& grid : grids) {
    const int blocks = grid.width / 8;
    p.width = grid.width;
    p.cluster = grid.cluster;
    p.skeleton = 1;
    p.store = 1;
    p.iterations = iterations / 2;
    for (int round = 0; round < 2; ++round) {
      for (int mode = 0; mode < 3; ++mode) {
        std::vector<float> ms;
        for (int launch = 0; launch < 5; ++launch) {
          for (auto* w : words_host) CHECK_CUDA(cudaMemset(w, 0, kRows * 784 * 4));
          float t = mode == 0 ? run<0, 1>(p, blocks, grid.cluster)
                              : mode == 1 ? run_tagged<0>(p, words, blocks, grid.cluster)
                                          : run_tagged<1>(p, words, blocks, grid.cluster);
          ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const char* modes[] = {"barrier + cp.async", "tags, cp.async", "tags, loads"};
        std::printf("%d blocks (clusters of %d) %-19s round %d: %8.1f ns an iteration\n", blocks, grid.cluster,
                    modes[mode], round, ms[2] * 1e6 / p.iterations);
      }
    }
  }
  int bad = 0;
  CHECK_CUDA(cudaMemcpy(&bad, p.mismatches, sizeof(int), cudaMemcpyDeviceToHost));
  std::printf("mismatches read after a barrier: %d\n", bad);
  return bad == 0 ? 0 : 1;
}
