// Every op of kernels/cuda/ops.h against kernels/cpu's (the oracle) on
// random inputs: NMSE <= 1e-7 in f32 (the norms, RoPE, activations), the
// BF16 outputs against the CPU's value rounded to BF16. Needs a GPU.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/dequant_blocks.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/testing/device.h"

namespace braid::kernels::cuda {
namespace {

using testing::Download;
using testing::Nmse;
using testing::RandomFloats;
using testing::Upload;
using testing::Zeros;

constexpr double kF32Tolerance = 1e-7;

std::vector<float> FromBf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = Bf16ToFloat(v[i]);
  return out;
}
std::vector<float> RoundBf16(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = Bf16ToFloat(FloatToBf16(v[i]));
  return out;
}

TEST(OpsGpuTest, RmsNormMatchesTheCpu) {
  for (int d : {64, 576, 2048, 4096}) {
    const int n = 7;
    std::vector<float> x = RandomFloats(n * d, d, 2.0f);
    std::vector<float> w = RandomFloats(d, d + 1);
    std::vector<float> want(n * d);
    cpu::RmsNorm(x.data(), w.data(), n, d, 1e-5f, want.data());
    DeviceBuffer dx = Upload(x), dw = Upload(w);
    DeviceBuffer df = Zeros<float>(n * d), db = Zeros<uint16_t>(n * d);
    ASSERT_EQ(RmsNormF32(dx.as<float>(), d, nullptr, n, d, dw.as<float>(),
                         1e-5f, df.as<float>(), nullptr),
              cudaSuccess);
    ASSERT_EQ(RmsNormToBf16(dx.as<float>(), d, nullptr, n, d, dw.as<float>(),
                            1e-5f, db.as<uint16_t>(), nullptr),
              cudaSuccess);
    EXPECT_LE(Nmse(Download<float>(df, n * d), want), kF32Tolerance) << d;
    EXPECT_LE(Nmse(FromBf16(Download<uint16_t>(db, n * d)), RoundBf16(want)),
              kF32Tolerance)
        << d;
  }
}

TEST(OpsGpuTest, GatedActivationsMatchTheCpu) {
  const int n = 5, ff = 1536;
  std::vector<float> gu = RandomFloats(n * 2 * ff, 3, 3.0f);
  for (GatedAct act : {GatedAct::kSilu, GatedAct::kGeluTanh}) {
    std::vector<float> want(n * ff);
    for (int t = 0; t < n; ++t) {
      std::vector<float> g(gu.begin() + t * 2 * ff,
                           gu.begin() + t * 2 * ff + ff);
      const float* u = gu.data() + t * 2 * ff + ff;
      if (act == GatedAct::kSilu) {
        cpu::SiluMul(g.data(), u, ff);
      } else {
        cpu::GeluTanhMul(g.data(), u, ff);
      }
      std::copy(g.begin(), g.end(), want.begin() + t * ff);
    }
    DeviceBuffer dgu = Upload(gu), dout = Zeros<uint16_t>(n * ff);
    ASSERT_EQ(GatedActToBf16(dgu.as<float>(), n, ff, act, dout.as<uint16_t>(),
                             nullptr),
              cudaSuccess);
    EXPECT_LE(Nmse(FromBf16(Download<uint16_t>(dout, n * ff)), RoundBf16(want)),
              kF32Tolerance);
  }
}

// Q/K/V epilogue: per-head norms, RoPE (both modes, Llama 3 frequency
// factors, linear scaling), Q scale, K/V to fp16 pool slots.
TEST(OpsGpuTest, QkvEpilogueMatchesTheCpuRope) {
  const int n = 6, n_head = 8, n_kv_head = 2, hd = 64;
  const int q_dim = n_head * hd, kv_dim = n_kv_head * hd;
  const int row = q_dim + 2 * kv_dim;
  std::vector<float> qkv = RandomFloats(n * row, 11);
  std::vector<float> qn = RandomFloats(hd, 12), kn = RandomFloats(hd, 13);
  std::vector<float> factors(hd / 2);
  for (int i = 0; i < hd / 2; ++i) factors[i] = 1.0f + 0.25f * (i % 5);
  std::vector<CudaEntryMeta> meta(n);
  std::vector<int32_t> pos(n);
  std::vector<int64_t> slots(n);
  for (int t = 0; t < n; ++t) {
    pos[t] = t * 37 + 1000 * (t % 2);
    meta[t] = {0, pos[t]};
    slots[t] = 3 * t + 1;
  }
  for (bool neox : {false, true}) {
    for (bool norms : {false, true}) {
      // The CPU: norm, RopeTable, RopeApply per head, scale.
      std::vector<float> cs(n * hd);
      cpu::RopeTable(pos.data(), n, hd, 10000.0f, cs.data(), factors.data(),
                     0.5f);
      std::vector<float> want = qkv;
      for (int t = 0; t < n; ++t) {
        for (int h = 0; h < n_head + n_kv_head; ++h) {
          float* x = want.data() + t * row + h * hd;
          if (norms) {
            cpu::RmsNorm(x, (h < n_head ? qn : kn).data(), 1, hd, 1e-6f, x);
          }
        }
      }
      if (neox) {
        cpu::RopeApplyNeox(want.data(), n, row, 0, q_dim + kv_dim, hd, hd,
                           cs.data());
      } else {
        cpu::RopeApply(want.data(), n, row, 0, q_dim + kv_dim, hd, hd,
                       cs.data());
      }
      DeviceBuffer dqkv = Upload(qkv), dqn = Upload(qn), dkn = Upload(kn);
      DeviceBuffer dff = Upload(factors), dmeta = Upload(meta);
      DeviceBuffer dslots = Upload(slots), dq = Zeros<float>(n * q_dim);
      const int n_slots = 3 * n + 1;
      DeviceBuffer dk = Zeros<uint16_t>(n_slots * kv_dim);
      DeviceBuffer dv = Zeros<uint16_t>(n_slots * kv_dim);
      RopeParams rope{hd, 10000.0f, 0.5f, dff.as<float>()};
      DeviceBuffer dcs = Zeros<float>(n * hd);
      ASSERT_EQ(RopeTable(dmeta.as<CudaEntryMeta>(), n, rope, dcs.as<float>(),
                          nullptr),
                cudaSuccess);
      ASSERT_EQ(QkvEpilogue(dqkv.as<float>(), n,
                            QkvShape{n_head, n_kv_head, hd, 1e-6f},
                            norms ? dqn.as<float>() : nullptr,
                            norms ? dkn.as<float>() : nullptr,
                            RopeRotation{neox, hd, dcs.as<float>()}, 0.125f,
                            dslots.as<int64_t>(), dq.as<float>(),
                            dk.as<uint16_t>(), dv.as<uint16_t>(), nullptr),
                cudaSuccess);
      std::vector<float> q = Download<float>(dq, n * q_dim);
      std::vector<uint16_t> k = Download<uint16_t>(dk, n_slots * kv_dim);
      std::vector<uint16_t> v = Download<uint16_t>(dv, n_slots * kv_dim);
      std::vector<float> want_q, got_k, want_k, got_v, want_v;
      for (int t = 0; t < n; ++t) {
        for (int i = 0; i < q_dim; ++i) {
          want_q.push_back(want[t * row + i] * 0.125f);
        }
        for (int i = 0; i < kv_dim; ++i) {
          got_k.push_back(cpu::Fp16ToFp32(k[slots[t] * kv_dim + i]));
          want_k.push_back(
              cpu::Fp16ToFp32(cpu::Fp32ToFp16(want[t * row + q_dim + i])));
          got_v.push_back(cpu::Fp16ToFp32(v[slots[t] * kv_dim + i]));
          want_v.push_back(cpu::Fp16ToFp32(
              cpu::Fp32ToFp16(qkv[t * row + q_dim + kv_dim + i])));
        }
      }
      EXPECT_LE(Nmse(q, want_q), kF32Tolerance) << neox << norms;
      EXPECT_LE(Nmse(got_k, want_k), kF32Tolerance) << neox << norms;
      EXPECT_EQ(got_v, want_v);
    }
  }
}

TEST(OpsGpuTest, SoftcapAndConversionMatchTheCpu) {
  std::vector<float> x = RandomFloats(10000, 5, 40.0f);
  std::vector<float> want = x;
  cpu::SoftcapInPlace(want.data(), want.size(), 30.0f);
  DeviceBuffer dx = Upload(x);
  ASSERT_EQ(Softcap(dx.as<float>(), x.size(), 30.0f, nullptr), cudaSuccess);
  EXPECT_LE(Nmse(Download<float>(dx, x.size()), want), kF32Tolerance);
  DeviceBuffer db = Zeros<uint16_t>(x.size());
  DeviceBuffer dx2 = Upload(x);
  ASSERT_EQ(F32ToBf16(dx2.as<float>(), x.size(), db.as<uint16_t>(), nullptr),
            cudaSuccess);
  std::vector<uint16_t> got = Download<uint16_t>(db, x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(got[i], FloatToBf16(x[i])) << i;
}

}  // namespace
}  // namespace braid::kernels::cuda
