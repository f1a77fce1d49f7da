// std::vector with 64-byte aligned storage, for buffers that kernels read
// and write in whole 512-bit vectors (a plain vector's storage is 16-byte
// aligned, so rows of 16 floats would straddle cache lines); AlignedBytes,
// an uninitialized 64-byte aligned block (repacked weights, written whole
// right after).
#ifndef BRAID_KERNELS_CPU_ALIGNED_VECTOR_H_
#define BRAID_KERNELS_CPU_ALIGNED_VECTOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace braid::kernels::cpu {

template <typename T>
struct CacheAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheAlignedAllocator() = default;
  template <typename U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) {}  // NOLINT
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), kAlign));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const CacheAlignedAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheAlignedAllocator<U>&) const {
    return false;
  }
};

template <typename T>
using AlignedVector = std::vector<T, CacheAlignedAllocator<T>>;

struct FreeBytes {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t, FreeBytes>;

// `bytes` (rounded up to 64) of uninitialized 64-byte aligned memory.
inline AlignedBytes AllocateAlignedBytes(size_t bytes) {
  return AlignedBytes(
      static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
}

// For weights repacked at load (read every step, never freed before the
// model): above 4 MiB, 2 MiB aligned, and the whole 2 MiB pages inside the
// bytes asked to be huge pages (transparent huge pages in madvise mode), so
// filling them takes one page fault per 2 MiB instead of per 4 KiB and a
// decode step streaming them misses the TLB 512x less often. The tail after
// the last whole 2 MiB stays in small pages (a huge page there would be
// resident in full). Where the kernel gives no huge pages the memory is
// ordinary.
inline AlignedBytes AllocateWeightBytes(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes < 2 * kHuge) return AllocateAlignedBytes(bytes);
  void* p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
  if (p != nullptr) madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);
  return AlignedBytes(static_cast<uint8_t*>(p));
}

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_ALIGNED_VECTOR_H_
