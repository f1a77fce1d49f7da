// Software prefetch that the compiler keeps. GCC 12 deletes _mm_prefetch /
// __builtin_prefetch as dead code in some inlined loops (tree DCE): every
// prefetch of the attention kernels was missing from the binaries until
// these replaced them. An asm statement is never deleted.
#ifndef BRAID_KERNELS_CPU_PREFETCH_H_
#define BRAID_KERNELS_CPU_PREFETCH_H_

namespace braid::kernels::cpu {

// The cache line holding p into L1 (and L2).
inline void PrefetchL1(const void* p) {
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
}

// The cache line holding p into L2.
inline void PrefetchL2(const void* p) {
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
}

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_PREFETCH_H_
