#define block_size_x 16
#define block_size_y 16
#define thread_m 1
#define thread_n 1
#define use_shared 0
#define tile_k 16
#define warps_m 2
#define warps_n 2
#define warp_tiles_m 2
#define warp_tiles_n 4
#define wgmma_m 64
#define wgmma_n 256
#define wgmma_groups 2
#define wgmma_stages 4
#define wgmma_tma 1
#define wgmma_producer 1
#line 1 "gemm_bf16.cu"
// Matrix product of bf16 inputs with f32 accumulation and output, all row-major:
//   C = A B,  A [M x K] bf16, B [K x N] bf16, C [M x N] f32
// bf16 values are passed as their 16-bit patterns (unsigned short): no cuda_bf16.h is needed (NVRTC has
// no CUDA include path here), and a bf16 is the upper half of the f32 with the same value.
//
// Two alternative implementations of the product, chosen by the `tensor_core` transform at the site
// `gemm` (the scalar one is active in the source and is the baseline):
//   scalar  CUDA-core FMAs. Baseline: one thread per output element, a 16 x 16 block, operands read from
//           global memory. Tuning parameters as in sgemm.cu: block_size_x, block_size_y (threads along N
//           and M), thread_m, thread_n (a register tile per thread, strided by the block size), use_shared
//           and tile_k (stage tile_k-deep slices of A and B in shared memory).
//   mma     tensor cores through the PTX instruction mma.sync.m16n8k16 (bf16 x bf16 + f32): a block of
//           warps_m x warps_n warps computes a (16*warps_m*warp_tiles_m) x (8*warps_n*warp_tiles_n) tile of
//           C, each warp warp_tiles_m x warp_tiles_n instruction tiles of 16 x 8; A and B go through shared
//           memory 32 deep along K (zeros past the edges). The launch geometry follows the choice (see
//           kernel.yaml).
//   wgmma   Hopper warpgroup MMA, wgmma.mma_async.m64nNk16 (bf16 x bf16 + f32), both operands read by the
//           tensor cores from shared memory through matrix descriptors (128-byte swizzle). A block of
//           wgmma_groups warpgroups (128 threads each) computes a (wgmma_groups*wgmma_m) x wgmma_n tile of
//           C, each warpgroup wgmma_m rows (wgmma_m / 64 instructions per 16-deep K step) by all wgmma_n
//           columns (one instruction N = wgmma_n). A and B reach shared memory 64 deep along K through a
//           ring of wgmma_stages slots, filled by 16-byte cp.async (zero-filled past the edges) when K (for
//           A) or N (for B) is a multiple of 8, else element by element into the same layout. Needs the
//           architecture-specific target sm_90a (kernel.yaml's `arch`); compiled for another target it
//           stops at an #error. Dynamic shared memory: kernel.yaml's shared_memory expression.
//           wgmma_tma = 1: the k-tiles arrive by TMA instead (cp.async.bulk.tensor.2d through the tensor
//           maps tmA and tmB, 128-byte swizzle, zeros past the edges) into the same layout, each slot
//           guarded by a "full" and an "empty" mbarrier; one thread issues the copies, either a thread of
//           the first consumer warpgroup between its MMAs (wgmma_producer = 0) or a warpgroup of its own
//           (wgmma_producer = 1: the block has wgmma_groups + 1 warpgroups, the last one the producer).
//           Shapes whose rows are not 16-byte aligned (K or N not a multiple of 8) take the cp.async
//           path, element by element, as before. Not yet run on a GPU (compile-checked only).
#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 16
#endif
#ifndef thread_m
#define thread_m 1
#endif
#ifndef thread_n
#define thread_n 1
#endif
#ifndef use_shared
#define use_shared 0
#endif
#ifndef tile_k
#define tile_k 16
#endif
#ifndef warps_m
#define warps_m 2
#endif
#ifndef warps_n
#define warps_n 2
#endif
#ifndef warp_tiles_m
#define warp_tiles_m 2
#endif
#ifndef warp_tiles_n
#define warp_tiles_n 4
#endif
#ifndef wgmma_m
#define wgmma_m 64
#endif
#ifndef wgmma_n
#define wgmma_n 256
#endif
#ifndef wgmma_groups
#define wgmma_groups 2
#endif
#ifndef wgmma_stages
#define wgmma_stages 4
#endif
#ifndef wgmma_tma
#define wgmma_tma 0
#endif
#ifndef wgmma_producer
#define wgmma_producer 0
#endif

// A TMA tensor map (the driver's CUtensorMap: 128 opaque bytes, 64-byte aligned), passed by value as a
// `const __grid_constant__` parameter so that its address is a parameter-space address the TMA unit can
// read. kernel.yaml's tmA and tmB: made by kforge's GPU worker (cuTensorMapEncodeTiled) over A and B for
// every launch when the configuration uses TMA and the shape allows it (see `when`), else 128 zero bytes
// that the kernel does not use.
struct __align__(64) gemm_tensor_map {
  unsigned long long opaque[16];
};

// File-scope definitions of each alternative: its block size GEMM_THREADS (for launch bounds) and, for
// wgmma, its shared-memory layout and PTX helpers.
//@kf tensor_core gemm begin=scalar
#if 0
#define GEMM_THREADS (block_size_x * block_size_y)
#endif
//@kf tensor_core gemm begin=mma
#if 0
#define GEMM_THREADS (32 * warps_m * warps_n)
#endif
//@kf tensor_core gemm begin=wgmma
#if 1
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_bf16: wgmma.mma_async needs the architecture-specific target sm_90a (kernel.yaml: arch)"
#endif
// Consumer warpgroups (the MMAs and the cp.async loads) first, then the producer warpgroup, if any.
#define WG_CONSUMERS (128 * wgmma_groups)
#define GEMM_THREADS (128 * (wgmma_groups + wgmma_producer))
#if wgmma_producer && !wgmma_tma
#error "gemm_bf16: wgmma_producer needs wgmma_tma (kernel.yaml's constraints)"
#endif
// One slot of the shared-memory ring, from a 1024-byte aligned base (so every 8-row x 128-byte swizzle
// atom starts on a 1024-byte boundary and the descriptors' base offset is 0):
//   A part: WG_BM x 64 bf16, K-major (as in global memory). Row m at m * 128 bytes; its 16-byte chunk j
//     (k = 8j .. 8j+7) at chunk position j ^ (m % 8). Eight rows make one 1024-byte atom.
//   B part: 64 x wgmma_n bf16, N-major (B is row-major, N contiguous, as in global memory): wgmma_n / 64
//     panels of 64 columns x 64 k-rows (8 KiB each). Row k of panel p at p * 8192 + k * 128; its chunk j
//     (n = 64p + 8j .. +7) at chunk position j ^ (k % 8).
// That is the 128-byte swizzle the tensor cores undo when a descriptor says so (byte-address bits 4-6
// XOR bits 7-9). The descriptors (wg_desc) say, per 16-deep K step s:
//   A, K-major (imm-trans-a 0): start at row wg * wgmma_m + 64 i, 32 s bytes into the row (the swizzle
//     applies to the computed addresses, so a start inside the atom's first row is allowed); stride byte
//     offset 1024 (the next 8 rows); leading byte offset unused for swizzled K-major layouts (16).
//   B, N-major (imm-trans-b 1, allowed for 16-bit types): start at k-row 16 s (2048 s bytes); leading
//     byte offset 8192 (from 64 columns to the next 64: the next panel); stride byte offset 1024 (from
//     8 k-rows to the next 8). (Canonical MN-major 128B layout, in 16-byte units: ((8,n),(8,k)) :
//     ((1,LBO),(8,SBO)).)
// B stays N-major in shared memory, as in global memory, so that both operands travel by 16-byte
// cp.async without a transpose on the way.
#define WG_BM (wgmma_groups * wgmma_m)
#define WG_BK 64
#define WG_A_BYTES (WG_BM * WG_BK * 2)
#define WG_B_BYTES (WG_BK * wgmma_n * 2)
#define WG_SLOT_BYTES (WG_A_BYTES + WG_B_BYTES)
#define WG_B_PANEL_BYTES (WG_BK * 128)
// cp.async path: per k-tile, each consumer thread copies WG_A_CHUNKS 16-byte chunks of A (rows WG_A_STEP
// apart) and WG_B_CHUNKS of B (k-rows WG_B_STEP apart); both divide exactly (WG_CONSUMERS is a multiple of 8
// and of wgmma_n / 8).
#define WG_A_STEP (WG_CONSUMERS / 8)
#define WG_A_CHUNKS (WG_BM * 8 / WG_CONSUMERS)
#define WG_B_STEP (WG_CONSUMERS / (wgmma_n / 8))
#define WG_B_CHUNKS (WG_BK * wgmma_n / 8 / WG_CONSUMERS)
// Pipeline: WG_PENDING wgmma groups (k-tiles) left in flight while the next k-tile is issued (1 when
// there are at least 3 slots), WG_AHEAD k-tiles loaded ahead; WG_PENDING + 1 + WG_AHEAD == wgmma_stages.
#define WG_PENDING (wgmma_stages >= 3 ? 1 : 0)
#define WG_AHEAD (wgmma_stages - 1 - WG_PENDING)

// Matrix descriptor of a wgmma operand in shared memory (PTX ISA, "Matrix Descriptor Format"): start
// address >> 4 in bits 0-13, leading byte offset >> 4 in bits 16-29, stride byte offset >> 4 in bits
// 32-45, base offset 0 in bits 49-51, swizzle mode 1 (128-byte swizzle) in bits 62-63.
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16 |
         (unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32 | 1ull << 62;
}
// 16 bytes from global to shared memory, asynchronously; the bytes past src_bytes (0 or 16) are zeros.
__device__ __forceinline__ void wg_cp_async16(unsigned dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void wg_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most `n` of this thread's cp.async groups are still in flight.
template <int n>
__device__ __forceinline__ void wg_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}
__device__ __forceinline__ void wg_st_shared16(unsigned dst, unsigned a, unsigned b, unsigned c, unsigned d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}
// Orders this thread's earlier generic-proxy writes to shared memory (cp.async, st.shared) before later
// async-proxy reads (wgmma reads its shared-memory operands through the async proxy).
__device__ __forceinline__ void wg_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most `n` of this warpgroup's wgmma groups are still in flight.
template <int n>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(n) : "memory");
}
// The consumer warpgroups' barrier: __syncthreads() when they are the whole block, else named barrier 1
// over their WG_CONSUMERS threads (the producer warpgroup never takes part in it).
__device__ __forceinline__ void wg_bar_consumers() {
#if wgmma_producer
  asm volatile("bar.sync 1, %0;\n" ::"n"(WG_CONSUMERS) : "memory");
#else
  __syncthreads();
#endif
}
#if wgmma_tma
// TMA path (PTX ISA: "Parallel Synchronization and Communication Instructions: mbarrier", "Data Movement
// and Conversion Instructions: cp.async.bulk.tensor"). Per ring slot s two 8-byte mbarriers after the ring:
//   full[s]   init count 1: completes a phase when the issuing thread's mbarrier.arrive.expect_tx (1
//             arrival, + the bytes of the boxes it copies: A's, and B's panels that start inside N) and the
//             TMA copies' complete_tx (the same bytes, zero-filled elements included) have both happened.
//   empty[s]  init count 4 * wgmma_groups: completes a phase when lane 0 of every consumer warp has arrived,
//             after wgmma.wait_group showed that the MMAs reading the slot are done.
// K-tile t uses slot t % wgmma_stages in round t / wgmma_stages; its full phase (and the empty phase that
// frees it) has parity round & 1. Consumers wait full[s] with parity (t / stages) & 1; the issuing thread
// waits empty[s] with parity (t / stages - 1) & 1 before refilling the slot for tile t >= stages.
__device__ __forceinline__ void wg_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// After the initialising thread's mbarrier.init, before any other thread or the TMA unit uses them (with a
// barrier after): fence.mbarrier_init orders the inits for other threads; fence.proxy.async for the async
// proxy, through which the TMA's complete_tx reaches the barrier.
__device__ __forceinline__ void wg_mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// One arrival (release semantics, CTA scope) that also raises the phase's expected transaction count by
// `bytes`.
__device__ __forceinline__ void wg_mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void wg_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Spins until the phase of parity `parity` has completed (acquire semantics, CTA scope: the TMA's writes
// that completed it are visible after). The labels are local to the asm's { } scope.
__device__ __forceinline__ void wg_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nWG_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@done bra WG_MBAR_DONE;\nbra WG_MBAR_WAIT;\nWG_MBAR_DONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// The box of `map` at coordinates (c0, c1), c0 the innermost dimension (elements), into shared memory at
// `dst` (1024-byte aligned for the 128-byte swizzle); completes `bytes` on the mbarrier `bar`.
__device__ __forceinline__ void wg_tma_load_2d(unsigned dst, const gemm_tensor_map* map, int c0, int c1,
                                               unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
#endif
// Keeps the compiler from moving uses of an accumulator register across the asynchronous MMAs.
__device__ __forceinline__ void wg_fence_operand(float& x) {
  asm volatile("" : "+f"(x)::"memory");
}
// D (64 x N f32, this thread's N/2 fragment registers) = A (64 x 16, K-major, a_desc) B (16 x N, N-major,
// b_desc) + (scale_d != 0 ? D : 0): wgmma.mma_async.m64nNk16.f32.bf16.bf16, no negation, imm-trans-a 0,
// imm-trans-b 1. Fragment of D (PTX ISA, "Matrix Fragments for wgmma.m64nNk16"): warp w of the warpgroup
// holds rows 16w .. 16w+15; lane l holds d[4j + 2h + e] = D[16w + l/4 + 8h][8j + 2(l%4) + e].
#if wgmma_n == 64
__device__ __forceinline__ void wg_mma_n64(float (&d)[32], unsigned long long a_desc, unsigned long long b_desc,
                                            int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
        "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
        "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}
#define WG_MMA wg_mma_n64
#elif wgmma_n == 128
__device__ __forceinline__ void wg_mma_n128(float (&d)[64], unsigned long long a_desc, unsigned long long b_desc,
                                            int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
        "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
        "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
        "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
        "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}
#define WG_MMA wg_mma_n128
#elif wgmma_n == 256
__device__ __forceinline__ void wg_mma_n256(float (&d)[128], unsigned long long a_desc, unsigned long long b_desc,
                                            int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, "
      "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "
      "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
      "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "
      "%123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
        "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
        "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
        "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
        "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),
        "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
        "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
        "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
        "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),
        "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]),
        "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),
        "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),
        "+f"(d[127])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}
#define WG_MMA wg_mma_n256
#else
#error "gemm_bf16: wgmma_n must be 64, 128 or 256"
#endif
#endif
//@kf tensor_core gemm end

__device__ __forceinline__ float bf16_to_float(unsigned short h) {
  return __uint_as_float((unsigned int)h << 16);
}

// D += A B for one warp: A 16x16 (row-major fragment, 4 registers of 2 bf16), B 16x8 (column fragment, 2
// registers), D 16x8 f32 (4 registers). Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16".
__device__ __forceinline__ void mma_m16n8k16(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#define BLOCK_M (block_size_y * thread_m)
#define BLOCK_N (block_size_x * thread_n)
#define TC_BM (16 * warps_m * warp_tiles_m)
#define TC_BN (8 * warps_n * warp_tiles_n)
#define TC_BK 32
#define TC_PAD 8  // bf16 elements of padding per shared row: rows stay 16-byte aligned, banks spread

extern "C" __global__ void gemm_bf16(int M, int N, int K, const unsigned short* A, const unsigned short* B,
                                     float* C, const __grid_constant__ gemm_tensor_map tmA,
                                     const __grid_constant__ gemm_tensor_map tmB) {
//@kf tensor_core gemm begin=scalar
#if 0
  const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;
  float acc[thread_m][thread_n];
#pragma unroll
  for (int i = 0; i < thread_m; ++i)
#pragma unroll
    for (int j = 0; j < thread_n; ++j) acc[i][j] = 0.0f;
#if use_shared
  __shared__ float As[tile_k][BLOCK_M];  // converted to f32 once, k-major: As[k][m]
  __shared__ float Bs[tile_k][BLOCK_N];
  const int tid = threadIdx.y * block_size_x + threadIdx.x;
  //@kf unroll k_tiles
  for (int k0 = 0; k0 < K; k0 += tile_k) {
    for (int e = tid; e < BLOCK_M * tile_k; e += block_size_x * block_size_y) {
      const int r = e / tile_k, kk = e % tile_k;
      const int gm = m0 + r, gk = k0 + kk;
      As[kk][r] = (gm < M && gk < K) ? bf16_to_float(A[(size_t)gm * K + gk]) : 0.0f;
    }
    for (int e = tid; e < tile_k * BLOCK_N; e += block_size_x * block_size_y) {
      const int kk = e / BLOCK_N, c = e % BLOCK_N;
      const int gk = k0 + kk, gn = n0 + c;
      Bs[kk][c] = (gk < K && gn < N) ? bf16_to_float(B[(size_t)gk * N + gn]) : 0.0f;
    }
    __syncthreads();
    //@kf unroll k_inner
    for (int kk = 0; kk < tile_k; ++kk) {
      float a[thread_m], b[thread_n];
#pragma unroll
      for (int i = 0; i < thread_m; ++i) a[i] = As[kk][threadIdx.y + i * block_size_y];
#pragma unroll
      for (int j = 0; j < thread_n; ++j) b[j] = Bs[kk][threadIdx.x + j * block_size_x];
#pragma unroll
      for (int i = 0; i < thread_m; ++i)
#pragma unroll
        for (int j = 0; j < thread_n; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#else
  //@kf unroll k_tiles
  for (int k = 0; k < K; ++k) {
    float a[thread_m], b[thread_n];
#pragma unroll
    for (int i = 0; i < thread_m; ++i) {
      const int m = m0 + threadIdx.y + i * block_size_y;
      a[i] = m < M ? bf16_to_float(A[(size_t)m * K + k]) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < thread_n; ++j) {
      const int n = n0 + threadIdx.x + j * block_size_x;
      b[j] = n < N ? bf16_to_float(B[(size_t)k * N + n]) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < thread_m; ++i)
#pragma unroll
      for (int j = 0; j < thread_n; ++j) acc[i][j] += a[i] * b[j];
  }
#endif
#pragma unroll
  for (int i = 0; i < thread_m; ++i) {
    const int m = m0 + threadIdx.y + i * block_size_y;
#pragma unroll
    for (int j = 0; j < thread_n; ++j) {
      const int n = n0 + threadIdx.x + j * block_size_x;
      if (m < M && n < N) C[(size_t)m * N + n] = acc[i][j];
    }
  }
#endif
//@kf tensor_core gemm begin=mma
#if 0
  // A tile row-major (m, k); B tile transposed to (n, k), so that both fragments read two consecutive k
  // values (one 32-bit word) per register.
  __shared__ __align__(16) unsigned short As[TC_BM][TC_BK + TC_PAD];
  __shared__ __align__(16) unsigned short Bs[TC_BN][TC_BK + TC_PAD];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;  // the fragment's row group and thread in group
  const int wm = warp % warps_m, wn = warp / warps_m;
  const int m0 = blockIdx.y * TC_BM, n0 = blockIdx.x * TC_BN;
  float acc[warp_tiles_m][warp_tiles_n][4];
#pragma unroll
  for (int i = 0; i < warp_tiles_m; ++i)
#pragma unroll
    for (int j = 0; j < warp_tiles_n; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
  //@kf unroll mma_k_tiles
  for (int k0 = 0; k0 < K; k0 += TC_BK) {
    for (int e = tid; e < TC_BM * TC_BK; e += GEMM_THREADS) {
      const int r = e / TC_BK, kk = e % TC_BK;
      const int gm = m0 + r, gk = k0 + kk;
      As[r][kk] = (gm < M && gk < K) ? A[(size_t)gm * K + gk] : (unsigned short)0;
    }
    for (int e = tid; e < TC_BK * TC_BN; e += GEMM_THREADS) {
      const int kk = e / TC_BN, c = e % TC_BN;
      const int gk = k0 + kk, gn = n0 + c;
      Bs[c][kk] = (gk < K && gn < N) ? B[(size_t)gk * N + gn] : (unsigned short)0;
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < TC_BK; ks += 16) {
      unsigned int a[warp_tiles_m][4], b[warp_tiles_n][2];
#pragma unroll
      for (int i = 0; i < warp_tiles_m; ++i) {
        const int r = (wm * warp_tiles_m + i) * 16 + g;
        a[i][0] = *(const unsigned int*)&As[r][ks + 2 * t];
        a[i][1] = *(const unsigned int*)&As[r + 8][ks + 2 * t];
        a[i][2] = *(const unsigned int*)&As[r][ks + 2 * t + 8];
        a[i][3] = *(const unsigned int*)&As[r + 8][ks + 2 * t + 8];
      }
#pragma unroll
      for (int j = 0; j < warp_tiles_n; ++j) {
        const int c = (wn * warp_tiles_n + j) * 8 + g;
        b[j][0] = *(const unsigned int*)&Bs[c][ks + 2 * t];
        b[j][1] = *(const unsigned int*)&Bs[c][ks + 2 * t + 8];
      }
#pragma unroll
      for (int i = 0; i < warp_tiles_m; ++i)
#pragma unroll
        for (int j = 0; j < warp_tiles_n; ++j) mma_m16n8k16(acc[i][j], a[i], b[j]);
    }
    __syncthreads();
  }
  // D fragment: registers 0, 1 at (row g, columns 2t, 2t+1), registers 2, 3 at row g + 8.
#pragma unroll
  for (int i = 0; i < warp_tiles_m; ++i) {
#pragma unroll
    for (int j = 0; j < warp_tiles_n; ++j) {
      const int r = m0 + (wm * warp_tiles_m + i) * 16 + g;
      const int c = n0 + (wn * warp_tiles_n + j) * 8 + 2 * t;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int rr = r + (q >= 2 ? 8 : 0), cc = c + (q & 1);
        if (rr < M && cc < N) C[(size_t)rr * N + cc] = acc[i][j][q];
      }
    }
  }
#endif
//@kf tensor_core gemm begin=wgmma
#if 1
  // Tiles in groups of 8 tile rows: consecutive blocks share B panels and A rows in L2.
  const int tiles_n = gridDim.x, tiles_m = gridDim.y;
  const int lin = blockIdx.y * tiles_n + blockIdx.x;
  const int group_tiles = 8 * tiles_n;
  const int first_m = lin / group_tiles * 8;
  const int group_rows = min(tiles_m - first_m, 8);
  const int m0 = (first_m + lin % group_tiles % group_rows) * WG_BM;
  const int n0 = lin % group_tiles / group_rows * wgmma_n;
  const int tid = threadIdx.x;
  const int wg = tid / 128;  // this thread's warpgroup: rows wg * wgmma_m .. of the tile
  extern __shared__ __align__(16) unsigned char wg_smem[];
  // The ring's base, rounded up to 1024 bytes (kernel.yaml's shared_memory adds 1024 bytes for this).
  const unsigned base = ((unsigned)__cvta_generic_to_shared(wg_smem) + 1023u) & ~1023u;
  const int k_tiles = (K + WG_BK - 1) / WG_BK;

  // This thread's share of a k-tile: A chunks i < WG_A_CHUNKS at row a_row + i * WG_A_STEP, 16-byte chunk
  // a_chunk (k = 8 a_chunk ..); WG_A_STEP is a multiple of 8, so every chunk has the swizzle of a_row.
  // B chunks i < WG_B_CHUNKS at k-row b_row + i * WG_B_STEP, chunk b_chunk (n = 8 b_chunk ..) of the tile.
  const int a_chunk = tid % 8, a_row = tid / 8;
  const unsigned a_off = a_row * 128 + ((a_chunk ^ (a_row % 8)) << 4);
  const int b_chunk = tid % (wgmma_n / 8), b_row = tid / (wgmma_n / 8);
  const unsigned b_off = WG_A_BYTES + b_chunk / 8 * WG_B_PANEL_BYTES + b_row * 128;
  // Rows of A inside M, as bits (the same for every k-tile).
  unsigned a_rows_in = 0;
#pragma unroll
  for (int i = 0; i < WG_A_CHUNKS; ++i) a_rows_in |= (m0 + a_row + i * WG_A_STEP < M ? 1u : 0u) << i;
  const bool b_col_in = n0 + 8 * b_chunk < N;

  // Descriptors of slot 0 (A: this warpgroup's first 64 rows; B: the first K step). A slot, K step or
  // row block adds its byte offset >> 4 to the start-address field (bits 0-13); shared addresses stay
  // below 2^18 bytes, so the sum never carries out of the field.
  const unsigned long long a_desc0 = wg_desc(base + wg * wgmma_m * 128, 16, 1024);
  const unsigned long long b_desc0 = wg_desc(base + WG_A_BYTES, WG_B_PANEL_BYTES, 1024);

  // Accumulators: not zeroed; the first MMA into each (k-tile 0, K step 0) ignores them (scale-d 0).
  // Zeroing them with ordinary instructions makes ptxas serialize the MMAs (C7515) when a wgmma group
  // stays in flight across iterations.
  float acc[wgmma_m / 64][wgmma_n / 2];
  auto fence_acc = [&] {
#pragma unroll
    for (int i = 0; i < wgmma_m / 64; ++i)
#pragma unroll
      for (int j = 0; j < wgmma_n / 2; ++j) wg_fence_operand(acc[i][j]);
  };

  // Writes k-tile kt (A[m0.., 64kt..], B[64kt.., n0..], zeros past the edges) into ring slot `slot` in the
  // swizzled layout. Rows of A and B 16-byte aligned (K and N multiples of 8): 16-byte cp.async with
  // src-size 0 (all zeros) past the edges; the main loop commits the groups.
  const bool vec = K % 8 == 0 && N % 8 == 0;
  const unsigned short* a_src = A + (size_t)(m0 + a_row) * K + 8 * a_chunk;
  const unsigned short* b_src = B + (size_t)b_row * N + n0 + 8 * b_chunk;
  auto load_vec = [&](int kt, int slot) {
    const int k0 = kt * WG_BK;
    const unsigned dst = base + slot * WG_SLOT_BYTES;
    const bool a_k_in = k0 + 8 * a_chunk < K;
#pragma unroll
    for (int i = 0; i < WG_A_CHUNKS; ++i) {
      const bool in = a_k_in && (a_rows_in >> i & 1u);
      wg_cp_async16(dst + a_off + i * WG_A_STEP * 128, in ? a_src + (size_t)i * WG_A_STEP * K + k0 : A,
                    in ? 16u : 0u);
    }
#pragma unroll
    for (int i = 0; i < WG_B_CHUNKS; ++i) {
      const int kr = b_row + i * WG_B_STEP;
      const bool in = b_col_in && k0 + kr < K;
      wg_cp_async16(dst + b_off + i * WG_B_STEP * 128 + (((b_chunk % 8) ^ (kr % 8)) << 4),
                    in ? b_src + (size_t)(k0 + i * WG_B_STEP) * N : B, in ? 16u : 0u);
    }
  };
  // Unaligned rows (check shapes): the same layout, element by element; loops not unrolled (this path
  // only has to be right, and must not raise the kernel's register count).
  auto load_elem = [&](int kt, int slot) {
    const int k0 = kt * WG_BK;
    const unsigned dst = base + slot * WG_SLOT_BYTES;
#pragma unroll 1
    for (int i = 0; i < WG_A_CHUNKS; ++i) {
      const int gm = m0 + a_row + i * WG_A_STEP, gk = k0 + 8 * a_chunk;
      unsigned w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const unsigned lo = gm < M && gk + 2 * e < K ? A[(size_t)gm * K + gk + 2 * e] : 0u;
        const unsigned hi = gm < M && gk + 2 * e + 1 < K ? A[(size_t)gm * K + gk + 2 * e + 1] : 0u;
        w[e] = lo | hi << 16;
      }
      wg_st_shared16(dst + a_off + i * WG_A_STEP * 128, w[0], w[1], w[2], w[3]);
    }
#pragma unroll 1
    for (int i = 0; i < WG_B_CHUNKS; ++i) {
      const int kr = b_row + i * WG_B_STEP;
      const int gk = k0 + kr, gn = n0 + 8 * b_chunk;
      unsigned w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const unsigned lo = gk < K && gn + 2 * e < N ? B[(size_t)gk * N + gn + 2 * e] : 0u;
        const unsigned hi = gk < K && gn + 2 * e + 1 < N ? B[(size_t)gk * N + gn + 2 * e + 1] : 0u;
        w[e] = lo | hi << 16;
      }
      wg_st_shared16(dst + b_off + i * WG_B_STEP * 128 + (((b_chunk % 8) ^ (kr % 8)) << 4), w[0], w[1], w[2],
                     w[3]);
    }
  };
  auto load = [&](int kt, int slot) {
    if (vec)
      load_vec(kt, slot);
    else
      load_elem(kt, slot);
  };

  // The MMAs of k-tile kt from its slot, as one wgmma group (K steps of 16, m64 blocks of the warpgroup's
  // rows); the first MMA into each accumulator (kt 0, step 0) ignores its old value.
  auto mma_tile = [&](int kt) {
    const unsigned slot_off = (kt % wgmma_stages) * WG_SLOT_BYTES;
    fence_acc();
    wg_fence();
#pragma unroll
    for (int s = 0; s < WG_BK / 16; ++s) {
      const unsigned long long b_desc = b_desc0 + ((slot_off + s * 2048) >> 4);
#pragma unroll
      for (int i = 0; i < wgmma_m / 64; ++i)
        WG_MMA(acc[i], a_desc0 + ((slot_off + i * 64 * 128 + s * 32) >> 4), b_desc, kt > 0 || s > 0);
    }
    wg_commit();
  };

#if wgmma_tma
  // TMA needs 16-byte aligned rows (global strides of K and N bf16): the condition of kernel.yaml's `when`
  // for tmA and tmB, without which they are zeros. The same for every thread of the block.
  if (vec) {
    // full[s] at bars + 8 s, empty[s] at bars + 8 (wgmma_stages + s), right after the ring.
    const unsigned bars = base + wgmma_stages * WG_SLOT_BYTES;
    auto full = [&](int slot) { return bars + 8u * slot; };
    auto empty = [&](int slot) { return bars + 8u * (wgmma_stages + slot); };
    if (tid == 0) {
#pragma unroll 1
      for (int s = 0; s < wgmma_stages; ++s) {
        wg_mbar_init(full(s), 1);
        wg_mbar_init(empty(s), 4 * wgmma_groups);
      }
      wg_mbar_init_fence();
    }
    __syncthreads();
    // B panels with a column inside N (at least 1: n0 < N). The others would be boxes wholly out of bounds;
    // they are not copied, and the MMAs read stale shared memory there, which only reaches accumulator
    // columns n >= N, never stored.
    const int b_panels = min(wgmma_n / 64, (N - n0 + 63) / 64);
    // K-tile t into slot t % wgmma_stages, by the one issuing thread: for t >= wgmma_stages it first waits
    // until every consumer warp has released tile t - wgmma_stages (the empty phase of round t / stages - 1),
    // then arrives on full with the bytes of the copies it issues next, which complete it: A's box
    // [64 k, WG_BM rows] at (k0, m0), and B's boxes [64 n, 64 k] at (n0 + 64 p, k0), one per 64-column
    // panel p < b_panels. A and B boxes start inside the tensors (k0 < K, m0 < M, n0 + 64 p < N), and a box
    // partly out of bounds still delivers all its bytes (zeros outside).
    auto produce = [&](int t) {
      const int slot = t % wgmma_stages;
      const unsigned dst = base + slot * WG_SLOT_BYTES;
      if (t >= wgmma_stages) wg_mbar_wait(empty(slot), (unsigned)(t / wgmma_stages - 1) & 1u);
      wg_mbar_arrive_expect_tx(full(slot), WG_A_BYTES + b_panels * WG_B_PANEL_BYTES);
      wg_tma_load_2d(dst, &tmA, t * WG_BK, m0, full(slot));
#pragma unroll
      for (int p = 0; p < wgmma_n / 64; ++p)
        if (p < b_panels)
          wg_tma_load_2d(dst + WG_A_BYTES + p * WG_B_PANEL_BYTES, &tmB, n0 + 64 * p, t * WG_BK, full(slot));
    };
#if wgmma_producer
    // The producer warpgroup: one thread issues every k-tile, the others have nothing to do.
    if (wg == wgmma_groups) {
      if (tid == WG_CONSUMERS) {
#pragma unroll 1
        for (int t = 0; t < k_tiles; ++t) produce(t);
      }
      return;
    }
#else
    // Thread 0 issues the first wgmma_stages k-tiles (every slot is free), the rest from the main loop.
    if (tid == 0) {
#pragma unroll 1
      for (int t = 0; t < k_tiles && t < wgmma_stages; ++t) produce(t);
    }
    __syncwarp();
#endif
    for (int kt = 0; kt < k_tiles; ++kt) {
      wg_mbar_wait(full(kt % wgmma_stages), (unsigned)(kt / wgmma_stages) & 1u);
      __syncwarp();  // converged for the .aligned wgmma instructions
      mma_tile(kt);
      wg_wait<WG_PENDING>();
      fence_acc();
      // This warp's MMAs of k-tile kt - WG_PENDING are complete: it no longer reads that slot.
      if (kt >= WG_PENDING && tid % 32 == 0) wg_mbar_arrive(empty((kt - WG_PENDING) % wgmma_stages));
#if !wgmma_producer
      // Refill the slot just released with the tile wgmma_stages later (waiting for the other warps).
      if (tid == 0 && kt >= WG_PENDING && kt - WG_PENDING + wgmma_stages < k_tiles)
        produce(kt - WG_PENDING + wgmma_stages);
#endif
      __syncwarp();
    }
  } else
#endif
  {
#if wgmma_producer
    // cp.async path: the consumer warpgroups load for themselves; the producer warpgroup has no part.
    if (wg >= wgmma_groups) return;
#endif
    // Prologue: k-tiles 0 .. WG_AHEAD-1 into slots 0 .., one cp.async group each (empty past the last tile,
    // so that k-tile t is always this thread's group t).
#pragma unroll
    for (int t = 0; t < WG_AHEAD; ++t) {
      if (t < k_tiles) load(t, t);
      wg_cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      // Groups committed so far: WG_AHEAD + kt; group kt (tile kt) must be complete.
      wg_cp_async_wait<WG_AHEAD - 1>();
      wg_fence_proxy_async();
      // After the barrier: every thread's part of tile kt is in shared memory, and every warpgroup has
      // finished the MMAs of tile kt - 1 - WG_PENDING (waited for at the end of the previous iteration),
      // whose slot is refilled below.
      wg_bar_consumers();
      mma_tile(kt);
      // Slot (kt + WG_AHEAD) % wgmma_stages is the slot of tile kt - 1 - WG_PENDING.
      if (kt + WG_AHEAD < k_tiles) load(kt + WG_AHEAD, (kt + WG_AHEAD) % wgmma_stages);
      wg_cp_async_commit();
      wg_wait<WG_PENDING>();
      fence_acc();
    }
  }
  wg_wait<0>();
  fence_acc();

  // Fragment of D (see WG_MMA): thread (warp w, lane l) holds rows 16w + l/4 (+8), columns 8j + 2(l%4) (+1).
  const int warp = tid % 128 / 32, lane = tid % 32;
#pragma unroll
  for (int i = 0; i < wgmma_m / 64; ++i) {
    const int r0 = m0 + wg * wgmma_m + 64 * i + 16 * warp + lane / 4;
#pragma unroll
    for (int j = 0; j < wgmma_n / 8; ++j) {
      const int c = n0 + 8 * j + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        // (K == 0: no MMA ran, the product is 0.)
        const float v0 = k_tiles > 0 ? acc[i][4 * j + 2 * h] : 0.0f;
        const float v1 = k_tiles > 0 ? acc[i][4 * j + 2 * h + 1] : 0.0f;
        if (r < M) {
          float* out = C + (size_t)r * N + c;
          if (N % 2 == 0 && c + 1 < N) {
            *(float2*)out = make_float2(v0, v1);
          } else {
            if (c < N) out[0] = v0;
            if (c + 1 < N) out[1] = v1;
          }
        }
      }
    }
  }
#endif
//@kf tensor_core gemm end
}
