// The kernel lab's probe of what the cluster kernel's stages are made of (docs/FUSED.md, v4): one
// cluster of 16 blocks x 256 threads with 200 KB of shared memory each, as cluster_epoch.cu runs,
// timing (1) a cluster barrier alone, (2) every block storing a 128 x 16-byte column block into the
// other 15 (broadcast_columns) then the barrier, (3) every thread loading 13 float4 from 13 blocks
// (first_reduce's partials) then the barrier, (4) __syncthreads alone, (5) 32 parameters a thread
// read, updated and written back in global memory (the update from L2), (6) the broadcast of (2)
// with each destination's piece contiguous, (7) the same with explicit st.shared::cluster stores,
// and the asynchronous (TMA engine) ways to move the same bytes, each completing on an mbarrier:
// (8) one cp.async.bulk of 2 KB from shared memory into each of the 15 others, (9) the same with
// 4 KB fp32 pieces (the first layer's partials pushed to their owners), (10) the generic-store
// equivalent of (9), (11) each block's 2 KB stored to global memory, then one bulk copy of all 16
// pieces (32 KB) from L2 into each block, (12) the same 2 KB pieces multicast from L2 into all 16
// blocks (.multicast::cluster), (13) every block bulk-copying 96 KB from L2 (the batch, uint8).
// Standalone on purpose:
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 bench/lab/cluster_probe.cu -o cluster_probe && ./cluster_probe
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace cg = cooperative_groups;

constexpr int kBlocks = 16, kThreads = 256, kIters = 2000;
constexpr int kSmem = 200 * 1024;

__device__ std::uint64_t now() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ std::uint32_t remote_address(std::uint32_t local, int rank) {
  std::uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}

__device__ void expect_bytes(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ void wait_phase(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n wait:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// One bulk copy from this block's shared memory into block `rank`'s, completing on its mbarrier.
__device__ void copy_to_block(const void* source, std::uint32_t local_destination, std::uint32_t local_bar, int rank,
                              std::uint32_t bytes) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          remote_address(local_destination, rank)),
      "r"(shared_address(source)), "r"(bytes), "r"(remote_address(local_bar, rank))
      : "memory");
}

__device__ void copy_from_global(std::uint32_t destination, const void* source, std::uint32_t bytes, std::uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   destination),
               "l"(source), "r"(bytes), "r"(bar)
               : "memory");
}

__device__ void multicast_from_global(std::uint32_t destination, const void* source, std::uint32_t bytes,
                                      std::uint32_t bar, std::uint16_t blocks) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], "
      "%4;" ::"r"(destination),
      "l"(source), "r"(bytes), "r"(bar), "h"(blocks)
      : "memory");
}

__global__ void probe(int test, float* global, std::uint64_t* ns) {
  extern __shared__ __align__(16) unsigned char smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  auto* buffer = reinterpret_cast<uint4*>(smem);  // 128 rows x 17 pieces of 16 bytes (a 136-wide bf16 row)
  for (int i = threadIdx.x; i < kSmem / 16; i += kThreads) buffer[i] = make_uint4(i, rank, 0, 0);
  // The mbarrier of the asynchronous tests sits past the buffers; one arrival a phase (thread 0's).
  __shared__ __align__(8) std::uint64_t bar_storage;
  const std::uint32_t bar = shared_address(&bar_storage);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the buffer's generic writes, before bulk reads
  std::uint32_t parity = 0;
  auto* pieces = reinterpret_cast<uint4*>(global) + 2 * 16 * 128;  // past test 5's parameters: [2][16][128] uint4
  cluster.sync();
  const std::uint64_t start = now();
  float sink = 0.0f;
  for (int it = 0; it < kIters; ++it) {
    if (test == 1) {
      cluster.sync();
    } else if (test == 2) {
      for (int i = threadIdx.x; i < 128 * 15; i += kThreads) {
        const int row = i % 128, k = i / 128, dst = k >= rank ? k + 1 : k;
        uint4* p = buffer + row * 17 + rank;
        *cluster.map_shared_rank(p, dst) = *p;
      }
      cluster.sync();
    } else if (test == 6) {
      // The same 30 KB, but each destination's piece contiguous (a column block stored [row][8]):
      // a warp writes 512 consecutive bytes.
      for (int i = threadIdx.x; i < 128 * 15; i += kThreads) {
        const int row = i % 128, k = i / 128, dst = k >= rank ? k + 1 : k;
        uint4* p = buffer + rank * 128 + row;
        *cluster.map_shared_rank(p, dst) = *p;
      }
      cluster.sync();
    } else if (test == 7) {
      // Contiguous pieces, written with explicit st.shared::cluster on mapa'd 32-bit addresses.
      for (int i = threadIdx.x; i < 128 * 15; i += kThreads) {
        const int row = i % 128, k = i / 128, dst = k >= rank ? k + 1 : k;
        uint4* p = buffer + rank * 128 + row;
        const uint4 v = *p;
        std::uint32_t local = static_cast<std::uint32_t>(__cvta_generic_to_shared(p)), remote;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(dst));
        asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(remote), "r"(v.x), "r"(v.y), "r"(v.z),
                     "r"(v.w)
                     : "memory");
      }
      cluster.sync();
    } else if (test == 3) {
      const float4* local = reinterpret_cast<const float4*>(smem) + threadIdx.x;
      float4 v[13];
#pragma unroll
      for (int s = 0; s < 13; ++s) v[s] = *cluster.map_shared_rank(local, s);
#pragma unroll
      for (int s = 0; s < 13; ++s) sink += v[s].x + v[s].w;
      cluster.sync();
    } else if (test == 8 || test == 9) {
      // Contiguous pieces (2 KB of bf16 columns, or 4 KB of fp32 partials) into the 15 others, one
      // bulk copy each, completing on the destination's mbarrier; the stage barrier after.
      const std::uint32_t bytes = test == 8 ? 2048 : 4096;
      if (threadIdx.x == 0) expect_bytes(bar, 15 * bytes);
      if (threadIdx.x < 15) {
        const int dst = threadIdx.x >= rank ? threadIdx.x + 1 : threadIdx.x;
        copy_to_block(smem + dst * bytes, shared_address(smem + 100 * 1024 + rank * bytes), bar, dst, bytes);
      }
      wait_phase(bar, parity);
      parity ^= 1;
      cluster.sync();
    } else if (test == 10) {
      // Test 9's 60 KB through generic 16-byte stores.
      for (int i = threadIdx.x; i < 256 * 15; i += kThreads) {
        const int row = i % 256, k = i / 256, dst = k >= rank ? k + 1 : k;
        *cluster.map_shared_rank(buffer + 6400 + rank * 256 + row, dst) = buffer[dst * 256 + row];
      }
      cluster.sync();
    } else if (test == 11 || test == 12) {
      // Each block's 2 KB column block through L2 (two buffers by parity, so one barrier a stage):
      // stored, made visible to the async proxy, then either all 16 pieces bulk-copied into each
      // block (11) or each piece multicast into all 16 (12).
      uint4* slot = pieces + (it % 2) * 16 * 128;
      if (threadIdx.x < 128) slot[rank * 128 + threadIdx.x] = buffer[threadIdx.x];
      asm volatile("fence.proxy.async.global;" ::: "memory");
      cluster.sync();
      if (threadIdx.x == 0) {
        expect_bytes(bar, 16 * 2048);
        if (test == 11) {
          copy_from_global(shared_address(smem + 100 * 1024), slot, 16 * 2048, bar);
        } else {
          multicast_from_global(shared_address(smem + 100 * 1024 + rank * 2048), slot + rank * 128, 2048, bar, 0xffff);
        }
      }
      wait_phase(bar, parity);
      parity ^= 1;
    } else if (test == 13) {
      if (threadIdx.x == 0) {
        expect_bytes(bar, 96 * 1024);
        copy_from_global(shared_address(smem), reinterpret_cast<const unsigned char*>(global) + (it % 8) * 96 * 1024,
                         96 * 1024, bar);
      }
      wait_phase(bar, parity);
      parity ^= 1;
      __syncthreads();
    } else if (test == 4) {
      __syncthreads();
    } else if (test == 5) {
      float p[32];
      float* base = global + (static_cast<std::int64_t>(rank) * kThreads + threadIdx.x);
#pragma unroll
      for (int j = 0; j < 32; ++j) p[j] = base[j * kBlocks * kThreads];
#pragma unroll
      for (int j = 0; j < 32; ++j) base[j * kBlocks * kThreads] = p[j] * 0.999f + 1e-3f;
      __syncthreads();
    }
  }
  const std::uint64_t end = now();
  if (sink == 12345.0f) global[0] = sink;  // keeps the loads
  if (rank == 0 && threadIdx.x == 0) *ns = end - start;
}

int main() {
  cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  float* global = nullptr;
  std::uint64_t* ns = nullptr;
  constexpr std::size_t kGlobalBytes = 8 * 96 * 1024;  // test 13's batches; covers tests 5, 11 and 12
  cudaMalloc(&global, kGlobalBytes);
  cudaMemset(global, 0, kGlobalBytes);
  cudaMallocManaged(&ns, sizeof(*ns));
  const char* names[] = {"", "cluster barrier", "broadcast 128 x 16 B to 15 blocks + barrier",
                         "13 remote float4 loads a thread + barrier", "__syncthreads", "32 parameters from L2 a thread, updated",
                         "broadcast, each piece contiguous + barrier", "the same with st.shared::cluster + barrier",
                         "bulk copies: 2 KB to each of 15 + mbarrier + barrier",
                         "bulk copies: 4 KB to each of 15 + mbarrier + barrier",
                         "generic stores: 4 KB to each of 15 + barrier",
                         "2 KB a block via L2: store, barrier, bulk 32 KB in",
                         "2 KB a block via L2: store, barrier, multicast in",
                         "96 KB bulk copy from L2 into each block"};
  for (int test = 1; test <= 13; ++test) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(kBlocks);
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kSmem;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = kBlocks;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    for (int rep = 0; rep < 2; ++rep) {  // the first is a warm-up
      const cudaError_t e = cudaLaunchKernelEx(&config, probe, test, global, ns);
      cudaDeviceSynchronize();
      if (e != cudaSuccess || cudaGetLastError() != cudaSuccess) {
        std::printf("test %d failed: %s\n", test, cudaGetErrorString(e));
        return 1;
      }
    }
    std::printf("%-45s %8.3f us\n", names[test], static_cast<double>(*ns) / kIters / 1e3);
  }
  return 0;
}
