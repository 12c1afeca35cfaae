#pragma once
// The PTX the fused engine's kernels are built from, one instruction a function: tensor-core
// products (mma.sync m16n8k16, bf16 in, fp32 accumulate) fed by ldmatrix; copies from global memory
// that run beside the thread (cp.async); the sm_90 exchange between the blocks of a cluster (bulk
// copies, or st.async stores, into another block's shared memory that complete on its mbarrier); and
// a pixel byte's exact float by a byte permute. Shared-memory operands are 32-bit shared-window
// addresses.
#include <cstdint>

namespace sprintnet::cuda::ptx {

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// Byte j (0-3) of `word` as a float, exactly, without an integer-to-float conversion (I2F: 16 a cycle an
// SM on Hopper, an eighth of the FP32 pipe): one prmt puts the byte in the mantissa of 2^23
// (0x4B000000 | byte = 2^23 + byte) and an exact subtraction removes 2^23.
__device__ __forceinline__ float byte_as_float(std::uint32_t word, int j) {
  return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7540u | static_cast<unsigned>(j))) - 8388608.0f;
}

// d += A · B: A a 16 x 16 fragment, B 16 x 8, thread (g = lane / 4, t = lane % 4) holding C's
// (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ldmatrix: four (or two) 8 x 8 matrices of 16-bit elements, each lane giving one row's address.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x2_trans(std::uint32_t (&r)[2], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(address));
}

// ---- copies from global memory into this block's shared memory that run beside the thread (sm_80
// cp.async; `to` a shared-window address): issued, committed as groups, waited for by group.
// 4 bytes through L1 (.ca: the only form for fewer than 16 bytes).
__device__ __forceinline__ void copy_async_4(std::uint32_t to, const void* from) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(to), "l"(from) : "memory");
}
// 16 bytes through L2 alone (.cg: the data is read once, by this block).
__device__ __forceinline__ void copy_async_16(std::uint32_t to, const void* from) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(from) : "memory");
}
// The same with `to` a generic pointer into this block's shared memory.
__device__ __forceinline__ void copy_async_4(void* to, const void* from) { copy_async_4(shared_address(to), from); }
__device__ __forceinline__ void copy_async_16(void* to, const void* from) { copy_async_16(shared_address(to), from); }
// Closes this thread's copies issued since the last commit into a group.
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Until at most kNewer of this thread's groups are still pending (the newest ones).
template <int kNewer>
__device__ __forceinline__ void copy_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kNewer) : "memory");
}
// The same for a count that is a constant only once the caller's loop is unrolled (wait_group takes an
// immediate); counts above 13 wait as 13.
__device__ __forceinline__ void copy_async_wait_group(int newer) {
  switch (newer) {
    case 0: copy_async_wait_group<0>(); break;
    case 1: copy_async_wait_group<1>(); break;
    case 2: copy_async_wait_group<2>(); break;
    case 3: copy_async_wait_group<3>(); break;
    case 4: copy_async_wait_group<4>(); break;
    case 5: copy_async_wait_group<5>(); break;
    case 6: copy_async_wait_group<6>(); break;
    case 7: copy_async_wait_group<7>(); break;
    case 8: copy_async_wait_group<8>(); break;
    case 9: copy_async_wait_group<9>(); break;
    case 10: copy_async_wait_group<10>(); break;
    case 11: copy_async_wait_group<11>(); break;
    case 12: copy_async_wait_group<12>(); break;
    default: copy_async_wait_group<13>(); break;
  }
}
// Every copy this thread issued, committed or not.
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// ---- the cluster exchange (sm_90).
// `address` in this block's shared memory, as the same offset in block `rank` of the cluster.
__device__ __forceinline__ std::uint32_t in_block(std::uint32_t address, int rank) {
  std::uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}
// An mbarrier expecting one arrival a phase (the receiver's own, with the bytes it waits for).
__device__ __forceinline__ void mbarrier_init(std::uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
// The cluster barrier in its two halves: arrive releases what this thread did before it; wait
// returns once every thread of the cluster has arrived and acquires what they released. `.aligned`:
// every thread of the warp executes them together.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// An arrival that orders no memory access (the release above is a GPU-scope fence in every warp,
// MEMBAR.ALL.GPU); writes another block reads after the barrier then need fence_cluster() first.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void fence_cluster() { asm volatile("fence.acq_rel.cluster;" ::: "memory"); }
// Makes the initialised mbarriers visible to the cluster (published by the next cluster barrier).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Orders this thread's generic writes to shared memory before bulk copies that read or overwrite it.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// `bytes` (a multiple of 16) from this block's `from` to `to` in another block (in_block
// addresses), completing on that block's mbarrier `bar` (an in_block address too).
__device__ __forceinline__ void bulk_copy_to_block(std::uint32_t to, std::uint32_t from, std::uint32_t bytes,
                                                   std::uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(to),
               "r"(from), "r"(bytes), "r"(bar)
               : "memory");
}
// `value` stored into another block's shared memory at `to` (an in_block address), counted on that
// block's mbarrier `bar` (an in_block address too) as 16 or 8 bytes landed: straight from registers, no
// staging buffer and no proxy fence (st.async: a bulk copy goes through the copy engine after both).
__device__ __forceinline__ void store_to_block(std::uint32_t to, uint4 value, std::uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1,%2,%3,%4}, [%5];" ::"r"(to),
               "r"(value.x), "r"(value.y), "r"(value.z), "r"(value.w), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void store_to_block(std::uint32_t to, float2 value, std::uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1,%2}, [%3];" ::"r"(to),
               "f"(value.x), "f"(value.y), "r"(bar)
               : "memory");
}
// `bytes` (a multiple of 16) from global memory to this block's shared memory at `to`, completing on
// this block's mbarrier `bar`.
__device__ __forceinline__ void bulk_copy_from_global(std::uint32_t to, const void* from, std::uint32_t bytes,
                                                      std::uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(to),
               "l"(from), "r"(bytes), "r"(bar)
               : "memory");
}
// The receiver's arrival: the phase completes once `bytes` have landed.
__device__ __forceinline__ void mbarrier_expect_bytes(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// The try_wait loop on an mbarrier's phase of parity %1, with the semantics `sem` ("": acquire at the
// block's scope, the default).
#define SPRINTNET_PTX_WAIT_LOOP(sem)                                                   \
  "{\n .reg .pred done;\n wait:\n mbarrier.try_wait.parity" sem ".shared::cta.b64 done, [%0], %1;\n" \
  " @!done bra wait;\n}"
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(SPRINTNET_PTX_WAIT_LOOP("") ::"r"(bar), "r"(parity) : "memory");
}
// The same, acquiring at cluster scope: what other blocks stored with st.async (released at cluster
// scope by its complete-tx) is visible to the thread once it returns.
__device__ __forceinline__ void mbarrier_wait_cluster(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(SPRINTNET_PTX_WAIT_LOOP(".acquire.cluster") ::"r"(bar), "r"(parity) : "memory");
}
#undef SPRINTNET_PTX_WAIT_LOOP

}  // namespace sprintnet::cuda::ptx
