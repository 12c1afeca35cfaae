// The kernel lab's probe of what the cluster kernel's stages are made of (docs/FUSED.md, v4): one
// cluster of 16 blocks x 256 threads with 200 KB of shared memory each, as cluster_epoch.cu runs,
// timing (1) a cluster barrier alone, (2) every block storing a 128 x 16-byte column block into the
// other 15 (broadcast_columns) then the barrier, (3) every thread loading 13 float4 from 13 blocks
// (first_reduce's partials) then the barrier, (4) __syncthreads alone, (5) 32 parameters a thread
// read, updated and written back in global memory (the update from L2), (6) the broadcast of (2)
// with each destination's piece contiguous, (7) the same with explicit st.shared::cluster stores.
// Standalone on purpose:
//   nvcc -std=c++17 -arch=sm_90a -O3 bench/lab/cluster_probe.cu -o cluster_probe && ./cluster_probe
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

__global__ void probe(int test, float* global, std::uint64_t* ns) {
  extern __shared__ __align__(16) unsigned char smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  auto* buffer = reinterpret_cast<uint4*>(smem);  // 128 rows x 17 pieces of 16 bytes (a 136-wide bf16 row)
  for (int i = threadIdx.x; i < kSmem / 16; i += kThreads) buffer[i] = make_uint4(i, rank, 0, 0);
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
  cudaMalloc(&global, sizeof(float) * kBlocks * kThreads * 32);
  cudaMemset(global, 0, sizeof(float) * kBlocks * kThreads * 32);
  cudaMallocManaged(&ns, sizeof(*ns));
  const char* names[] = {"", "cluster barrier", "broadcast 128 x 16 B to 15 blocks + barrier",
                         "13 remote float4 loads a thread + barrier", "__syncthreads", "32 parameters from L2 a thread, updated",
                         "broadcast, each piece contiguous + barrier", "the same with st.shared::cluster + barrier"};
  for (int test = 1; test <= 7; ++test) {
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
