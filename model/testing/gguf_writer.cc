#include "model/testing/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "kernels/cpu/quant/quant.h"

namespace braid::model::testing {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out->append(buf, sizeof(T));
}

void PutString(std::string* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

}  // namespace

void GgufWriter::AddKey(const std::string& key, GgufValueType type) {
  ++n_kv_;
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(type));
}

#define BRAID_GGUF_SCALAR(Method, CType, Enum)               \
  void GgufWriter::Method(const std::string& key, CType v) { \
    AddKey(key, GgufValueType::Enum);                        \
    Put<CType>(&kv_bytes_, v);                               \
  }
BRAID_GGUF_SCALAR(AddUint8, uint8_t, kUint8)
BRAID_GGUF_SCALAR(AddInt8, int8_t, kInt8)
BRAID_GGUF_SCALAR(AddUint16, uint16_t, kUint16)
BRAID_GGUF_SCALAR(AddInt16, int16_t, kInt16)
BRAID_GGUF_SCALAR(AddUint32, uint32_t, kUint32)
BRAID_GGUF_SCALAR(AddInt32, int32_t, kInt32)
BRAID_GGUF_SCALAR(AddUint64, uint64_t, kUint64)
BRAID_GGUF_SCALAR(AddInt64, int64_t, kInt64)
BRAID_GGUF_SCALAR(AddFloat32, float, kFloat32)
BRAID_GGUF_SCALAR(AddFloat64, double, kFloat64)
#undef BRAID_GGUF_SCALAR

void GgufWriter::AddBool(const std::string& key, bool v) {
  AddKey(key, GgufValueType::kBool);
  Put<uint8_t>(&kv_bytes_, v ? 1 : 0);
}

void GgufWriter::AddString(const std::string& key, const std::string& v) {
  AddKey(key, GgufValueType::kString);
  PutString(&kv_bytes_, v);
}

void GgufWriter::AddStringArray(const std::string& key,
                                const std::vector<std::string>& v) {
  AddKey(key, GgufValueType::kArray);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(GgufValueType::kString));
  Put<uint64_t>(&kv_bytes_, v.size());
  for (const std::string& s : v) PutString(&kv_bytes_, s);
}

void GgufWriter::AddInt32Array(const std::string& key,
                               const std::vector<int32_t>& v) {
  AddKey(key, GgufValueType::kArray);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(GgufValueType::kInt32));
  Put<uint64_t>(&kv_bytes_, v.size());
  for (int32_t x : v) Put<int32_t>(&kv_bytes_, x);
}

void GgufWriter::AddFloat32Array(const std::string& key,
                                 const std::vector<float>& v) {
  AddKey(key, GgufValueType::kArray);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(GgufValueType::kFloat32));
  Put<uint64_t>(&kv_bytes_, v.size());
  for (float x : v) Put<float>(&kv_bytes_, x);
}

void GgufWriter::AddNestedInt32Array(
    const std::string& key, const std::vector<std::vector<int32_t>>& v) {
  AddKey(key, GgufValueType::kArray);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(GgufValueType::kArray));
  Put<uint64_t>(&kv_bytes_, v.size());
  for (const auto& inner : v) {
    Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(GgufValueType::kInt32));
    Put<uint64_t>(&kv_bytes_, inner.size());
    for (int32_t x : inner) Put<int32_t>(&kv_bytes_, x);
  }
}

void GgufWriter::AddTensor(const std::string& name, GgmlType type,
                           const std::vector<int64_t>& dims, std::string data) {
  tensors_.push_back({name, type, dims, std::move(data)});
}

void GgufWriter::AddTensorFromFloats(const std::string& name, GgmlType type,
                                     const std::vector<int64_t>& dims,
                                     const std::vector<float>& values) {
  namespace k = ::braid::kernels::cpu;
  const auto dtype = static_cast<k::DType>(type);
  const int64_t row = dims[0];
  const int64_t n_rows = static_cast<int64_t>(values.size()) / row;
  const size_t row_bytes = k::DTypeRowBytes(dtype, row);
  std::string data(row_bytes * n_rows, '\0');
  for (int64_t r = 0; r < n_rows; ++r) {
    k::QuantizeRow(dtype, values.data() + r * row, &data[r * row_bytes], row);
  }
  AddTensor(name, type, dims, std::move(data));
}

std::string GgufWriter::Serialize() const {
  std::string out;
  Put<uint32_t>(&out, 0x46554747);
  Put<uint32_t>(&out, version_);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, n_kv_ + (write_alignment_ ? 1 : 0));
  out += kv_bytes_;
  if (write_alignment_) {
    PutString(&out, "general.alignment");
    Put<uint32_t>(&out, static_cast<uint32_t>(GgufValueType::kUint32));
    Put<uint32_t>(&out, alignment_);
  }
  auto align = [&](uint64_t x) {
    return (x + alignment_ - 1) / alignment_ * alignment_;
  };
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(&out, d);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&out, offset);
    offset = align(offset + t.data.size());
  }
  // `offset` is now the data's size: one allocation for the whole image
  // (gigabytes for cuda_bench's models), not a copy per doubling.
  out.reserve(align(out.size()) + offset);
  out.resize(align(out.size()), '\0');
  const size_t data_start = out.size();
  offset = 0;
  for (const Tensor& t : tensors_) {
    out.resize(data_start + offset, '\0');
    out += t.data;
    offset = align(offset + t.data.size());
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const std::string bytes = Serialize();
  f.write(bytes.data(), bytes.size());
  f.close();
  if (!f) return absl::UnavailableError("cannot write " + path);
  return absl::OkStatus();
}

}  // namespace braid::model::testing
