// A small GGUF (v2/v3) writer for tests: metadata of every scalar type, string
// and numeric arrays, and tensors given as raw bytes or as floats to quantize.
//
// Not for production use: it buffers everything in memory. Not thread-safe.
#ifndef BRAID_MODEL_TESTING_GGUF_WRITER_H_
#define BRAID_MODEL_TESTING_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/gguf.h"

namespace braid::model::testing {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  void AddUint8(const std::string& key, uint8_t v);
  void AddInt8(const std::string& key, int8_t v);
  void AddUint16(const std::string& key, uint16_t v);
  void AddInt16(const std::string& key, int16_t v);
  void AddUint32(const std::string& key, uint32_t v);
  void AddInt32(const std::string& key, int32_t v);
  void AddUint64(const std::string& key, uint64_t v);
  void AddInt64(const std::string& key, int64_t v);
  void AddFloat32(const std::string& key, float v);
  void AddFloat64(const std::string& key, double v);
  void AddBool(const std::string& key, bool v);
  void AddString(const std::string& key, const std::string& v);
  void AddStringArray(const std::string& key,
                      const std::vector<std::string>& v);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& v);
  void AddFloat32Array(const std::string& key, const std::vector<float>& v);
  // An array of arrays of int32 (nested arrays are legal GGUF).
  void AddNestedInt32Array(const std::string& key,
                           const std::vector<std::vector<int32_t>>& v);

  // dims are ggml ne[] (innermost first); `data` must be the exact encoding.
  void AddTensor(const std::string& name, GgmlType type,
                 const std::vector<int64_t>& dims, std::string data);
  // Encodes row-major float values (dims[0] per row) as `type`.
  void AddTensorFromFloats(const std::string& name, GgmlType type,
                           const std::vector<int64_t>& dims,
                           const std::vector<float>& values);

  // The file image. Writes general.alignment only if set_alignment() was
  // called.
  std::string Serialize() const;
  absl::Status WriteFile(const std::string& path) const;

  void set_alignment(uint32_t alignment) {
    alignment_ = alignment;
    write_alignment_ = true;
  }

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    std::string data;
  };
  void AddKey(const std::string& key, GgufValueType type);

  uint32_t version_;
  uint32_t alignment_ = 32;
  bool write_alignment_ = false;
  uint64_t n_kv_ = 0;
  std::string kv_bytes_;
  std::vector<Tensor> tensors_;
};

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_GGUF_WRITER_H_
