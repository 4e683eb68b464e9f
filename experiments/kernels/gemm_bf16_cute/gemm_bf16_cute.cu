// gemm_bf16_cute: C = A B with bf16 A [M x K] (row-major, K-major), bf16 B [K x N] (row-major, N-major), f32
// accumulation and f32 C (row-major): gemm_bf16's problem, written with CuTe (CUTLASS's layout algebra)
// and Hopper GMMA atoms (wgmma.mma_async, both operands from shared memory). kforge's own code; the CuTe
// headers come from PyPI's nvidia-cutlass (kernel.yaml: include_packages).
//
// One template holds every configuration (kernel.yaml: injection template, entry a name expression):
//   BM, BN, BK  the block's tile of C (BM x BN) and the depth of a k-tile; BM / 64 warpgroups of 128
//               threads, each 64 rows (one m64nBNk16 GMMA atom per 16-deep step of BK)
//   CM, CN      the thread-block cluster (__cluster_dims__(CM, CN, 1)): blocks of a cluster are
//               co-scheduled on one GPC; no TMA multicast (the loads are cp.async), so it changes
//               placement and L2 locality only
//   STAGES      shared-memory slots of the k-tile ring (STAGES - 1 k-tiles are loaded ahead)
//   SCHEDULE    0: the MMAs of a k-tile are waited for before the next k-tile's (wgmma.wait_group 0);
//               1: one k-tile of MMAs stays in flight while the next is issued (wait_group 1)
// Contract: M % BM == 0, N % BN == 0, K % BK == 0 (no predication at the edges; the description's
// shapes are multiples of every tile), and A, B, C 16-byte aligned. Grid (M / BM, N / BN), multiples
// of the cluster; block 2 BM threads; dynamic shared memory STAGES (BM + BN) BK 2 bytes + 1024.
#include <cute/tensor.hpp>
#include <cute/arch/copy_sm80.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/mma_atom.hpp>

template <int BM, int BN, int BK, int CM, int CN, int STAGES, int SCHEDULE>
__global__ void __cluster_dims__(CM, CN, 1) __launch_bounds__(2 * BM)
    gemm_bf16_cute(int M, int N, int K, const cute::bfloat16_t* A, const cute::bfloat16_t* B, float* C) {
  using namespace cute;
  using T = bfloat16_t;
  static_assert(BM % 64 == 0 && BN % 64 == 0 && (BK == 32 || BK % 64 == 0) && STAGES >= 2);
  static_assert(SCHEDULE == 0 || SCHEDULE == 1);
  constexpr int threads = 2 * BM;
  if (M % BM != 0 || N % BN != 0 || K % BK != 0) return;  // outside the contract: C stays unwritten

  // Shared-memory ring: A K-major, B N-major (as in global memory), in the swizzled layouts GMMA reads.
  using atom_a = conditional_t<BK % 64 == 0, GMMA::Layout_K_SW128_Atom<T>, GMMA::Layout_K_SW64_Atom<T>>;
  auto sA_layout = tile_to_shape(atom_a{}, make_shape(Int<BM>{}, Int<BK>{}, Int<STAGES>{}));
  auto sB_layout = tile_to_shape(GMMA::Layout_MN_SW128_Atom<T>{}, make_shape(Int<BN>{}, Int<BK>{}, Int<STAGES>{}));
  extern __shared__ unsigned char smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: align the ring to 1024 (the +1024 of shared_memory).
  T* smem_a = reinterpret_cast<T*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  T* smem_b = smem_a + cosize(sA_layout);
  Tensor sA = make_tensor(make_smem_ptr(smem_a), sA_layout);  // (BM, BK, STAGES)
  Tensor sB = make_tensor(make_smem_ptr(smem_b), sB_layout);  // (BN, BK, STAGES)

  // Global views: A (M, K) stride (K, 1); B as (N, K) stride (1, N); C (M, N) stride (N, 1).
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, Int<1>{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(Int<1>{}, N));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, Int<1>{}));
  auto tiler = make_shape(Int<BM>{}, Int<BN>{}, Int<BK>{});
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});  // (BM, BK, k-tiles)
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});  // (BN, BK, k-tiles)
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});  // (BM, BN)

  // cp.async 16 bytes (8 bf16) per thread and copy: A along K, B along N.
  constexpr int a_k = BK / 8, b_n = BN / 8 < threads ? BN / 8 : threads;
  auto copy_a = make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>{},
                                Layout<Shape<Int<threads / a_k>, Int<a_k>>, Stride<Int<a_k>, _1>>{},
                                Layout<Shape<_1, _8>>{});
  auto copy_b = make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>{},
                                Layout<Shape<Int<b_n>, Int<threads / b_n>>, Stride<_1, Int<b_n>>>{},
                                Layout<Shape<_8, _1>>{});
  auto thr_a = copy_a.get_slice(threadIdx.x);
  auto thr_b = copy_b.get_slice(threadIdx.x);
  Tensor tAgA = thr_a.partition_S(gA);
  Tensor tAsA = thr_a.partition_D(as_position_independent_swizzle_tensor(sA));
  Tensor tBgB = thr_b.partition_S(gB);
  Tensor tBsB = thr_b.partition_D(as_position_independent_swizzle_tensor(sB));

  // BM / 64 warpgroups along M, each one GMMA atom of 64 x BN.
  auto mma = make_tiled_mma(
      GMMA::ss_op_selector<T, T, float, Shape<_64, Int<BN>, Int<BK>>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<BM / 64>, _1, _1>>{});
  auto thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCsA = thr_mma.partition_A(sA);
  Tensor tCsB = thr_mma.partition_B(sB);
  Tensor tCgC = thr_mma.partition_C(gC);
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // GMMA descriptors
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);
  Tensor acc = thr_mma.make_fragment_C(tCgC);

  const int k_tiles = K / BK;
  CUTE_UNROLL
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) {
      copy(copy_a, tAgA(_, _, _, s), tAsA(_, _, _, s));
      copy(copy_b, tBgB(_, _, _, s), tBsB(_, _, _, s));
    }
    cp_async_fence();
  }
  // The first MMA of the tile overwrites the accumulators (scale-d 0): they are never zeroed with
  // ordinary instructions, which would make ptxas serialise the MMAs.
  mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_NO_UNROLL
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int slot = kt % STAGES;
    cp_async_wait<STAGES - 2>();  // this thread's copies of k-tile kt have landed
    // cp.async writes through the generic proxy, wgmma reads through the async proxy (PTX ISA,
    // "Memory Consistency Model: proxies"), then every thread's copies before any MMA.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {
      gemm(mma, tCrA(_, _, kb, slot), tCrB(_, _, kb, slot), acc);
      mma.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    warpgroup_wait<SCHEDULE>();  // k-tile kt - SCHEDULE's MMAs are done (this warpgroup)
    warpgroup_fence_operand(acc);
    __syncthreads();             // ... in every warpgroup: slot (kt - 1) % STAGES is free
    const int next = kt + STAGES - 1;
    if (next < k_tiles) {
      copy(copy_a, tAgA(_, _, _, next), tAsA(_, _, _, next % STAGES));
      copy(copy_b, tBgB(_, _, _, next), tBsB(_, _, _, next % STAGES));
    }
    cp_async_fence();
  }
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);
  copy(acc, tCgC);
}
