// The GEMM tiles' per-block scale tables (the products d_w * d_x of a
// block's rows and tokens, which each product step broadcasts from memory)
// are written kScalesAhead blocks ahead of the steps that read them, into a
// ring of kScaleRing blocks' tables. Internal to kernels/cpu.
//
// Why ahead: with the table written one block before it is read (a table of
// two), each step's broadcast load read a line that a wide store had written
// one iteration earlier, and the AVX-512 8-token quad tile ran at 0.198 ns
// per element and block in cache (gemm_tile_bench 8) against 0.165-0.176
// three blocks ahead (0.178 two ahead, 0.172-0.180 four or six ahead).
// Whole decode steps, binaries alternating (llama_bench, one core complex):
// 8 sequences 1550-1650 -> 1697-1805 tok/s; with --avx2 (whose tiles wrote
// the table in the same iteration) 8 sequences 658-678 -> 737-757 and one
// stream 367-395 -> 388-416. The 8-row x 4-token tile (3-4 tokens) and one
// or two AVX-512 sequences are unchanged.
#ifndef BRAID_KERNELS_CPU_GEMM_SCALE_RING_H_
#define BRAID_KERNELS_CPU_GEMM_SCALE_RING_H_

#include <cstdint>

namespace braid::kernels::cpu::internal {

inline constexpr int64_t kScaleRing = 4;
inline constexpr int64_t kScalesAhead = 3;
static_assert(kScalesAhead < kScaleRing, "a table is read before rewritten");
static_assert((kScaleRing & (kScaleRing - 1)) == 0, "RingSlot masks");

// Block i's table in the ring.
inline int64_t RingSlot(int64_t i) { return i & (kScaleRing - 1); }

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_GEMM_SCALE_RING_H_
