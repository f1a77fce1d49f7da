#include "kernels/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/status.h"

namespace braid::kernels::cuda {

namespace {

// One (shape, m) product: D^T [n, m] = W [n, k] (transposed from the
// column-major [k, n] it is) . X^T [k, m], column-major throughout.
struct Plan {
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct ShapePlans {
  GemmShape shape;
  cublasLtMatmulDesc_t desc = nullptr;
  std::vector<Plan> by_bucket;  // [GemmBuckets(max_m).size()]
};

}  // namespace

struct GemmPlans::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::vector<ShapePlans> shapes;
  cublasLtMatmulPreference_t pref = nullptr;

  ~Impl() {
    for (ShapePlans& s : shapes) {
      for (Plan& p : s.by_bucket) {
        if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
        if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
        if (p.d != nullptr) cublasLtMatrixLayoutDestroy(p.d);
      }
      if (s.desc != nullptr) cublasLtMatmulDescDestroy(s.desc);
    }
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (handle != nullptr) cublasLtDestroy(handle);
  }

  absl::Status MakeDesc(ShapePlans& s) {
    BRAID_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescCreate(&s.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        s.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
    BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        s.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
    const cublasLtEpilogue_t epi = s.shape.epilogue == GemmEpilogue::kBias
                                       ? CUBLASLT_EPILOGUE_BIAS
                                       : CUBLASLT_EPILOGUE_DEFAULT;
    BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (s.shape.epilogue == GemmEpilogue::kBias) {
      const cudaDataType_t bias_type = CUDA_R_32F;
      BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          s.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
          sizeof(bias_type)));
    }
    return absl::OkStatus();
  }

  absl::Status MakePlan(const ShapePlans& s, int m, Plan& p) {
    const GemmShape& g = s.shape;
    BRAID_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, g.k, g.n, g.k));
    BRAID_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, g.k, m, g.k));
    BRAID_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, g.n, m, g.n));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(
        handle, s.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found));
    if (found == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cuBLASLt has no BF16 algorithm for n=", g.n, " k=", g.k, " m=", m));
    }
    p.algo = result.algo;
    return absl::OkStatus();
  }
};

GemmPlans::GemmPlans(std::unique_ptr<Impl> impl, int max_m, size_t ws)
    : impl_(std::move(impl)), max_m_(max_m), workspace_bytes_(ws) {}

GemmPlans::~GemmPlans() = default;

absl::StatusOr<std::unique_ptr<GemmPlans>> GemmPlans::Create(
    const std::vector<GemmShape>& shapes, int max_m, size_t workspace_bytes) {
  if (max_m < 1) return absl::InvalidArgumentError("GemmPlans: max_m < 1");
  for (const GemmShape& g : shapes) {
    if (g.n <= 0 || g.k <= 0 || g.k % 8 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("GemmPlans: shape n=", g.n, " k=", g.k,
                       " (both > 0, k a multiple of 8 for aligned BF16 rows)"));
    }
  }
  auto impl = std::make_unique<Impl>();
  BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&impl->handle));
  absl::StatusOr<DeviceBuffer> ws =
      DeviceBuffer::Allocate(workspace_bytes, "cuBLASLt workspace");
  if (!ws.ok()) return ws.status();
  impl->workspace = *std::move(ws);
  BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&impl->pref));
  BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      impl->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));
  const std::vector<int> buckets = GemmBuckets(max_m);
  impl->shapes.resize(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    ShapePlans& s = impl->shapes[i];
    s.shape = shapes[i];
    if (absl::Status st = impl->MakeDesc(s); !st.ok()) return st;
    s.by_bucket.resize(buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (absl::Status st = impl->MakePlan(s, buckets[b], s.by_bucket[b]);
          !st.ok()) {
        return st;
      }
    }
  }
  return std::unique_ptr<GemmPlans>(
      new GemmPlans(std::move(impl), max_m, workspace_bytes));
}

absl::Status GemmPlans::Run(int shape, int m, const uint16_t* x,
                            const uint16_t* w, const float* bias, float* y,
                            void* stream) const {
  if (shape < 0 || shape >= static_cast<int>(impl_->shapes.size()) || m < 1 ||
      m > max_m_) {
    return absl::InvalidArgumentError(
        absl::StrCat("GemmPlans::Run: shape ", shape, ", m ", m));
  }
  const ShapePlans& s = impl_->shapes[shape];
  const Plan& p = s.by_bucket[GemmBucketIndex(m, max_m_)];
  if (s.shape.epilogue == GemmEpilogue::kBias) {
    BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        s.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  const float alpha = 1.0f;
  const float beta = s.shape.epilogue == GemmEpilogue::kResidual ? 1.0f : 0.0f;
  BRAID_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(
      impl_->handle, s.desc, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d,
      &p.algo, impl_->workspace.data(), impl_->workspace.bytes(),
      static_cast<cudaStream_t>(stream)));
  return absl::OkStatus();
}

}  // namespace braid::kernels::cuda
