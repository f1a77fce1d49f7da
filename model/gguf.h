// Reader for GGUF model files (versions 2 and 3).
//
// GgufFile maps (or owns) the whole file and validates every header field,
// metadata value and tensor descriptor in Open()/FromBytes(); a corrupt or
// truncated file yields InvalidArgument or DataLoss naming the field and byte
// offset, never a crash. Metadata values are decoded from the validated bytes
// on each Get*() call (cheap: nothing is duplicated at load). Tensor data stays
// in the mapping; GgufTensor::data points into it and lives as long as the
// GgufFile. Thread-safety: immutable after construction; all const methods are
// thread-safe.
#ifndef BRAID_MODEL_GGUF_H_
#define BRAID_MODEL_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace braid::model {

namespace internal {
class GgufCursor;  // gguf.cc
}  // namespace internal

// Tensor element types this reader accepts (values are ggml's). Files with any
// other tensor type are rejected at load with an error naming the type.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kBF16 = 30,
};

// ggml's name for a type id ("Q4_K", "F32", ...), or "type<N>" when unknown.
std::string GgmlTypeName(uint32_t raw_type);

// GGUF metadata value types (values are the file format's).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> dims;  // ggml ne[]: innermost (row length) first.
  const uint8_t* data = nullptr;
  size_t size_bytes = 0;

  int64_t num_elements() const;
};

class GgufFile {
 public:
  // Maps the file read-only. Errors: NotFound/PermissionDenied from open(2),
  // InvalidArgument/DataLoss for a malformed file.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(
      const std::string& path);
  // Parses an in-memory copy it owns (tests, fuzzing).
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(std::string bytes);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }

  bool Has(std::string_view key) const;
  // NotFound when the key is absent, InvalidArgument when its type does not
  // fit.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;   // Any int type.
  absl::StatusOr<double> GetFloat(std::string_view key) const;  // Float or int.
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(
      std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;
  // The value type of `key`, or NotFound.
  absl::StatusOr<GgufValueType> GetType(std::string_view key) const;
  // All metadata keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }

  // Drops this process's copies of the pages wholly inside [p, p + n) (tensor
  // data of this file) when the file is memory-mapped: a later read faults
  // them back in from the file. A no-op for in-memory files (FromBytes),
  // whose pages hold the only copy.
  void ReleasePages(const void* p, size_t n) const;

  // nullptr if absent.
  const GgufTensor* FindTensor(std::string_view name) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

 private:
  struct KvEntry {
    GgufValueType type;
    size_t value_offset;  // Byte offset of the value (after the type field).
  };

  // Where a tensor's info said its data lies (PlaceTensorData checks it).
  struct RawTensor {
    uint64_t offset = 0;
    size_t info_pos = 0;
  };

  GgufFile() = default;
  // Walks the header, metadata and tensor table once, validating as it
  // goes, in these steps.
  absl::Status Parse();
  // The header's counts of tensors and metadata entries.
  struct Counts {
    uint64_t n_tensors = 0;
    uint64_t n_kv = 0;
  };
  absl::StatusOr<Counts> ParseHeader(internal::GgufCursor& c);
  absl::Status ParseMetadata(internal::GgufCursor& c, uint64_t n_kv);
  absl::Status ReadAlignment();
  absl::StatusOr<RawTensor> ParseTensorInfo(internal::GgufCursor& c);
  absl::Status PlaceTensorData(size_t info_end,
                               const std::vector<RawTensor>& raw);
  absl::StatusOr<const KvEntry*> Find(absl::string_view key) const;

  // Backing storage: either owned bytes or an mmap.
  std::string owned_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;

  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::vector<std::string> keys_;
  absl::flat_hash_map<std::string, KvEntry> kv_;
  std::vector<GgufTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_GGUF_H_
