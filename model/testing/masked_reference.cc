#include "model/testing/masked_reference.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/quant/quant.h"
#include "model/gguf.h"
#include "model/model_config.h"

namespace braid::model::testing {
namespace {

namespace k = ::braid::kernels::cpu;

using Mat = std::vector<double>;  // Row-major.

struct RefWeights {
  int rows = 0, cols = 0;
  Mat w;
};

RefWeights Dequant(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.FindTensor(name);
  RefWeights r;
  if (t == nullptr) return r;
  r.cols = static_cast<int>(t->dims[0]);
  r.rows = t->dims.size() > 1 ? static_cast<int>(t->dims[1]) : 1;
  const k::DType type = static_cast<k::DType>(static_cast<uint32_t>(t->type));
  const size_t row_bytes = k::DTypeRowBytes(type, r.cols);
  std::vector<float> row(r.cols);
  for (int i = 0; i < r.rows; ++i) {
    k::DequantizeRow(type, t->data + i * row_bytes, row.data(), r.cols);
    r.w.insert(r.w.end(), row.begin(), row.end());
  }
  return r;
}

// y[t] = W x[t] for n rows of x.
Mat Apply(const RefWeights& w, const Mat& x, int n) {
  Mat y(static_cast<size_t>(n) * w.rows, 0.0);
  for (int t = 0; t < n; ++t) {
    for (int r = 0; r < w.rows; ++r) {
      double acc = 0;
      for (int c = 0; c < w.cols; ++c) {
        acc += w.w[static_cast<size_t>(r) * w.cols + c] *
               x[static_cast<size_t>(t) * w.cols + c];
      }
      y[static_cast<size_t>(t) * w.rows + r] = acc;
    }
  }
  return y;
}

Mat RmsNorm(const Mat& x, const RefWeights& w, int n, int d, double eps) {
  Mat y(x.size());
  for (int t = 0; t < n; ++t) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += x[t * d + i] * x[t * d + i];
    const double scale = 1.0 / std::sqrt(ss / d + eps);
    for (int i = 0; i < d; ++i) y[t * d + i] = x[t * d + i] * scale * w.w[i];
  }
  return y;
}

// GGUF "normal" RoPE on every head of row t: pairs (2i, 2i + 1), 2i < n_rot,
// rotate by y * base^(-2i / n_rot).
void Rope(Mat& x, int n, int n_heads, int hd, int n_rot, double base,
          const std::vector<MaskedEntry>& e) {
  for (int t = 0; t < n; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      double* v = x.data() + (static_cast<size_t>(t) * n_heads + h) * hd;
      for (int i = 0; i < n_rot; i += 2) {
        const double theta = e[t].y * std::pow(base, -double(i) / n_rot);
        const double c = std::cos(theta), s = std::sin(theta);
        const double a = v[i], b = v[i + 1];
        v[i] = a * c - b * s;
        v[i + 1] = a * s + b * c;
      }
    }
  }
}

}  // namespace

bool MaskedVisible(const std::vector<std::vector<int32_t>>& sees,
                   const MaskedEntry& a, const MaskedEntry& b) {
  const std::vector<int32_t>& s = sees[a.stream];
  return std::find(s.begin(), s.end(), b.stream) != s.end() &&
         (b.y < a.y || (b.stream == a.stream && b.y <= a.y));
}

std::vector<std::vector<float>> MaskedFullForward(
    const LlamaModel& model, const std::vector<MaskedEntry>& entries,
    const std::vector<std::vector<int32_t>>& sees) {
  const LlamaConfig& c = model.config();
  const GgufFile& f = model.file();
  const int n = static_cast<int>(entries.size());
  const int d = c.n_embd, hd = c.head_dim, kvd = c.kv_dim();
  const RefWeights tok = Dequant(f, "token_embd.weight");
  const RefWeights se = Dequant(f, "stream_embd.weight");
  Mat x(static_cast<size_t>(n) * d);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < d; ++i) {
      x[t * d + i] = tok.w[static_cast<size_t>(entries[t].token) * d + i] +
                     (se.w.empty() ? 0.0 : se.w[entries[t].stream * d + i]);
    }
  }
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = absl::StrCat("blk.", il, ".");
    Mat h = RmsNorm(x, Dequant(f, p + "attn_norm.weight"), n, d, c.rms_eps);
    Mat q = Apply(Dequant(f, p + "attn_q.weight"), h, n);
    Mat kk = Apply(Dequant(f, p + "attn_k.weight"), h, n);
    Mat v = Apply(Dequant(f, p + "attn_v.weight"), h, n);
    Rope(q, n, c.n_head, hd, c.n_rot, c.rope_base, entries);
    Rope(kk, n, c.n_head_kv, hd, c.n_rot, c.rope_base, entries);
    Mat attn(static_cast<size_t>(n) * c.n_head * hd, 0.0);
    const int group = c.n_head / c.n_head_kv;
    for (int t = 0; t < n; ++t) {
      for (int hh = 0; hh < c.n_head; ++hh) {
        const int kh = hh / group;
        std::vector<double> score(n, 0.0);
        double mx = -1e300;
        for (int j = 0; j < n; ++j) {
          if (!MaskedVisible(sees, entries[t], entries[j])) continue;
          double dot = 0;
          for (int i = 0; i < hd; ++i) {
            dot += q[(t * c.n_head + hh) * hd + i] * kk[j * kvd + kh * hd + i];
          }
          score[j] = dot / std::sqrt(double(hd));
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        for (int j = 0; j < n; ++j) {
          if (!MaskedVisible(sees, entries[t], entries[j])) {
            score[j] = 0;
            continue;
          }
          score[j] = std::exp(score[j] - mx);
          sum += score[j];
        }
        for (int j = 0; j < n; ++j) {
          for (int i = 0; i < hd; ++i) {
            attn[(t * c.n_head + hh) * hd + i] +=
                score[j] / sum * v[j * kvd + kh * hd + i];
          }
        }
      }
    }
    Mat o = Apply(Dequant(f, p + "attn_output.weight"), attn, n);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = RmsNorm(x, Dequant(f, p + "ffn_norm.weight"), n, d, c.rms_eps);
    Mat g = Apply(Dequant(f, p + "ffn_gate.weight"), h, n);
    Mat u = Apply(Dequant(f, p + "ffn_up.weight"), h, n);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    Mat down = Apply(Dequant(f, p + "ffn_down.weight"), g, n);
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  Mat h = RmsNorm(x, Dequant(f, "output_norm.weight"), n, d, c.rms_eps);
  const RefWeights out_w = f.FindTensor("output.weight") != nullptr
                               ? Dequant(f, "output.weight")
                               : tok;
  Mat logits = Apply(out_w, h, n);
  std::vector<std::vector<float>> rows(n);
  for (int t = 0; t < n; ++t) {
    rows[t].assign(logits.begin() + int64_t{t} * c.n_vocab,
                   logits.begin() + int64_t{t + 1} * c.n_vocab);
  }
  return rows;
}

double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

double MaxRelErr(const std::vector<std::vector<float>>& a,
                 const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t t = 0; t < b.size(); ++t)
    worst = std::max(worst, RelErr(a[t], b[t]));
  return worst;
}

}  // namespace braid::model::testing
