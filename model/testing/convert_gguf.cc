#include "model/testing/convert_gguf.h"

#include <cstdint>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/quant/quant.h"
#include "model/testing/gguf_writer.h"

namespace braid::model::testing {
namespace {

namespace k = ::braid::kernels::cpu;

absl::Status CopyKey(const GgufFile& src, const std::string& key,
                     GgufWriter& w) {
  absl::StatusOr<GgufValueType> type = src.GetType(key);
  if (!type.ok()) return type.status();
  switch (*type) {
    case GgufValueType::kString:
      w.AddString(key, *src.GetString(key));
      return absl::OkStatus();
    case GgufValueType::kBool:
      w.AddBool(key, *src.GetBool(key));
      return absl::OkStatus();
    case GgufValueType::kFloat32:
      w.AddFloat32(key, static_cast<float>(*src.GetFloat(key)));
      return absl::OkStatus();
    case GgufValueType::kFloat64:
      w.AddFloat64(key, *src.GetFloat(key));
      return absl::OkStatus();
    case GgufValueType::kUint8:
      w.AddUint8(key, static_cast<uint8_t>(*src.GetInt(key)));
      return absl::OkStatus();
    case GgufValueType::kInt8:
      w.AddInt8(key, static_cast<int8_t>(*src.GetInt(key)));
      return absl::OkStatus();
    case GgufValueType::kUint16:
      w.AddUint16(key, static_cast<uint16_t>(*src.GetInt(key)));
      return absl::OkStatus();
    case GgufValueType::kInt16:
      w.AddInt16(key, static_cast<int16_t>(*src.GetInt(key)));
      return absl::OkStatus();
    case GgufValueType::kUint32:
      w.AddUint32(key, static_cast<uint32_t>(*src.GetInt(key)));
      return absl::OkStatus();
    case GgufValueType::kInt32:
      w.AddInt32(key, static_cast<int32_t>(*src.GetInt(key)));
      return absl::OkStatus();
    case GgufValueType::kUint64:
      w.AddUint64(key, static_cast<uint64_t>(*src.GetInt(key)));
      return absl::OkStatus();
    case GgufValueType::kInt64:
      w.AddInt64(key, *src.GetInt(key));
      return absl::OkStatus();
    case GgufValueType::kArray:
      if (auto v = src.GetStringArray(key); v.ok()) {
        w.AddStringArray(key, *v);
      } else if (auto ints = src.GetIntArray(key); ints.ok()) {
        w.AddInt32Array(key, std::vector<int32_t>(ints->begin(), ints->end()));
      } else if (auto floats = src.GetFloatArray(key); floats.ok()) {
        w.AddFloat32Array(key, *floats);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot copy the array ", key));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot copy ", key));
}

}  // namespace

absl::StatusOr<std::string> ConvertMatrices(const GgufFile& src, GgmlType to) {
  if (to != GgmlType::kF16 && to != GgmlType::kBF16 && to != GgmlType::kF32) {
    return absl::InvalidArgumentError("convert to F16, BF16 or F32");
  }
  GgufWriter w(3);
  for (const std::string& key : src.keys()) {
    if (key == "general.alignment") continue;
    if (absl::Status s = CopyKey(src, key, w); !s.ok()) return s;
  }
  for (const GgufTensor& t : src.tensors()) {
    const bool quantized = t.type == GgmlType::kQ4_0 ||
                           t.type == GgmlType::kQ4_1 ||
                           t.type == GgmlType::kQ8_0;
    if (!quantized) {
      w.AddTensor(
          t.name, t.type, t.dims,
          std::string(reinterpret_cast<const char*>(t.data), t.size_bytes));
      continue;
    }
    const int64_t n = t.num_elements(), row = t.dims[0];
    std::vector<float> values(n);
    const auto type = static_cast<k::DType>(t.type);
    const size_t row_bytes = k::DTypeRowBytes(type, row);
    for (int64_t r = 0; r < n / row; ++r) {
      k::DequantizeRow(type, t.data + r * row_bytes, &values[r * row], row);
    }
    w.AddTensorFromFloats(t.name, to, t.dims, values);
  }
  return w.Serialize();
}

absl::StatusOr<std::string> TokenizerOnly(const GgufFile& src) {
  GgufWriter w(3);
  for (const std::string& key : src.keys()) {
    if (key == "general.alignment") continue;
    if (!absl::StartsWith(key, "general.") &&
        !absl::StartsWith(key, "tokenizer.")) {
      continue;
    }
    if (absl::Status s = CopyKey(src, key, w); !s.ok()) return s;
  }
  return w.Serialize();
}

}  // namespace braid::model::testing
