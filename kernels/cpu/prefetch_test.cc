#include "kernels/cpu/prefetch.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace braid::kernels::cpu {
namespace {

struct Regions {
  const uint8_t* near = nullptr;
  int64_t near_bytes = 0;
  const uint8_t* far = nullptr;
  int64_t far_bytes = 0;
};

inline void FetchRegions(Regions r) {
  for (int64_t b = 0; b < r.near_bytes; b += 64) PrefetchL1(r.near + b);
  for (int64_t b = 0; b < r.far_bytes; b += 64) PrefetchL2(r.far + b);
}

// The shape from which GCC 12 at -O2 deleted both loops of _mm_prefetch
// (a local struct's regions, fetched by an inlined function).
__attribute__((noinline)) void Fetch(const uint8_t* w, int64_t n) {
  Regions r;
  r.near = w;
  r.near_bytes = n;
  r.far = w + 4096;
  r.far_bytes = n;
  FetchRegions(r);
}

// Counts prefetcht0 and prefetcht1 instructions (0F 18 with ModRM reg 1
// or 2) in the code from fn up to its first return.
void CountPrefetches(const void* fn, int* t0, int* t1) {
  const uint8_t* code = static_cast<const uint8_t*>(fn);
  *t0 = *t1 = 0;
  for (int i = 0; i + 2 < 512 && code[i] != 0xC3; ++i) {
    if (code[i] == 0x0F && code[i + 1] == 0x18) {
      const int reg = (code[i + 2] >> 3) & 7;
      *t0 += reg == 1;
      *t1 += reg == 2;
    }
  }
}

TEST(PrefetchTest, LoopsOfPrefetchesStayInTheCode) {
  int t0 = 0, t1 = 0;
  CountPrefetches(reinterpret_cast<const void*>(&Fetch), &t0, &t1);
  EXPECT_GE(t0, 1) << "prefetcht0 deleted by the compiler";
  EXPECT_GE(t1, 1) << "prefetcht1 deleted by the compiler";
  // And they run (no fault on any address: prefetch never faults).
  uint8_t buf[8192];
  std::memset(buf, 0, sizeof(buf));
  Fetch(buf, 4096);
  Fetch(nullptr, 128);
}

}  // namespace
}  // namespace braid::kernels::cpu
