#include "model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "util/status_macros.h"

namespace braid::model {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian.
constexpr int kMaxDims = 4;
constexpr int kMaxArrayNesting = 3;

}  // namespace

// Bounds-checked little-endian cursor over the file bytes. Every failure names
// the field being read and its byte offset.
class internal::GgufCursor {
 public:
  GgufCursor(const uint8_t* base, size_t size, size_t pos = 0)
      : base_(base), size_(size), pos_(pos) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  absl::Status Read(T* out, absl::string_view what) {
    if (remaining() < sizeof(T)) return Truncated(what, sizeof(T));
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status Skip(uint64_t n, absl::string_view what) {
    if (remaining() < n) return Truncated(what, n);
    pos_ += n;
    return absl::OkStatus();
  }

  // A GGUF string: uint64 length + bytes.
  absl::Status ReadString(absl::string_view* out, absl::string_view what) {
    const size_t at = pos_;
    uint64_t len = 0;
    if (absl::Status s = Read(&len, what); !s.ok()) return s;
    if (len > remaining()) {
      return absl::DataLossError(
          absl::StrCat(what, " at byte ", at, ": length ", len, " exceeds the ",
                       remaining(), " bytes left in the file"));
    }
    *out = absl::string_view(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

  absl::Status Truncated(absl::string_view what, uint64_t need) const {
    return absl::DataLossError(absl::StrCat("truncated GGUF: ", what,
                                            " at byte ", pos_, " needs ", need,
                                            " bytes, ", remaining(), " left"));
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_;
};

namespace {

using Cursor = internal::GgufCursor;

// Size in bytes of a scalar value type; 0 for string/array, -1 for unknown.
int ScalarSize(uint32_t type) {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return -1;
}

// Smallest encoding of one element of `type` (for bounding counts).
uint64_t MinEncodedSize(uint32_t type) {
  const int s = ScalarSize(type);
  if (s > 0) return s;
  if (type == static_cast<uint32_t>(GgufValueType::kString)) return 8;
  return 12;  // Array: element type + count.
}

bool IsIntType(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

// Validates (and skips) one value of `type` at the cursor.
absl::Status SkipValue(Cursor& c, uint32_t type, absl::string_view key,
                       int depth) {
  const int scalar = ScalarSize(type);
  if (scalar < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' at byte ", c.pos(),
                     ": unknown value type ", type));
  }
  if (scalar > 0) return c.Skip(scalar, absl::StrCat("value of '", key, "'"));
  if (type == static_cast<uint32_t>(GgufValueType::kString)) {
    absl::string_view s;
    return c.ReadString(&s, absl::StrCat("string value of '", key, "'"));
  }
  // Array.
  if (depth >= kMaxArrayNesting) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' at byte ", c.pos(),
                     ": arrays nested deeper than ", kMaxArrayNesting));
  }
  const size_t at = c.pos();
  uint32_t elem_type = 0;
  uint64_t count = 0;
  if (absl::Status s = c.Read(&elem_type, "array element type"); !s.ok()) {
    return s;
  }
  if (absl::Status s = c.Read(&count, "array length"); !s.ok()) return s;
  if (ScalarSize(elem_type) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' at byte ", at,
                     ": unknown array element type ", elem_type));
  }
  if (count > c.remaining() / MinEncodedSize(elem_type)) {
    return absl::DataLossError(absl::StrCat(
        "GGUF key '", key, "' at byte ", at, ": array length ", count,
        " cannot fit in the ", c.remaining(), " bytes left"));
  }
  const int elem_scalar = ScalarSize(elem_type);
  if (elem_scalar > 0) return c.Skip(count * elem_scalar, "array data");
  for (uint64_t i = 0; i < count; ++i) {
    if (absl::Status s = SkipValue(c, elem_type, key, depth + 1); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Reads an integer scalar of `type` (already validated) as int64.
absl::StatusOr<int64_t> ReadInt(Cursor& c, GgufValueType type,
                                absl::string_view key) {
  auto read = [&](auto v) -> absl::StatusOr<int64_t> {
    if (absl::Status s = c.Read(&v, key); !s.ok()) return s;
    if constexpr (std::is_same_v<decltype(v), uint64_t>) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::OutOfRangeError(
            absl::StrCat("GGUF key '", key, "': value ", v, " exceeds int64"));
      }
    }
    return static_cast<int64_t>(v);
  };
  switch (type) {
    case GgufValueType::kUint8:
      return read(uint8_t{});
    case GgufValueType::kInt8:
      return read(int8_t{});
    case GgufValueType::kUint16:
      return read(uint16_t{});
    case GgufValueType::kInt16:
      return read(int16_t{});
    case GgufValueType::kUint32:
      return read(uint32_t{});
    case GgufValueType::kInt32:
      return read(int32_t{});
    case GgufValueType::kUint64:
      return read(uint64_t{});
    case GgufValueType::kInt64:
      return read(int64_t{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF key '", key, "' is not an integer"));
  }
}

absl::StatusOr<double> ReadNumber(Cursor& c, GgufValueType type,
                                  absl::string_view key) {
  if (type == GgufValueType::kFloat32) {
    float f = 0;
    if (absl::Status s = c.Read(&f, key); !s.ok()) return s;
    return f;
  }
  if (type == GgufValueType::kFloat64) {
    double d = 0;
    if (absl::Status s = c.Read(&d, key); !s.ok()) return s;
    return d;
  }
  if (IsIntType(type)) {
    absl::StatusOr<int64_t> v = ReadInt(c, type, key);
    if (!v.ok()) return v.status();
    return static_cast<double>(*v);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("GGUF key '", key, "' is not a number"));
}

// Every tensor type the reader accepts: {type, elements per block, bytes
// per block}, in the order the error message lists them.
struct TensorTypeInfo {
  GgmlType type;
  int64_t block, bytes;
};
constexpr TensorTypeInfo kTensorTypes[] = {
    {GgmlType::kF32, 1, 4},      {GgmlType::kF16, 1, 2},
    {GgmlType::kBF16, 1, 2},     {GgmlType::kQ8_0, 32, 34},
    {GgmlType::kQ4_0, 32, 18},   {GgmlType::kQ4_1, 32, 20},
    {GgmlType::kQ5_0, 32, 22},   {GgmlType::kQ5_1, 32, 24},
    {GgmlType::kIQ4_NL, 32, 18}, {GgmlType::kQ2_K, 256, 84},
    {GgmlType::kQ3_K, 256, 110}, {GgmlType::kQ4_K, 256, 144},
    {GgmlType::kQ5_K, 256, 176}, {GgmlType::kQ6_K, 256, 210},
};

const TensorTypeInfo* FindTensorType(uint32_t t) {
  for (const TensorTypeInfo& info : kTensorTypes) {
    if (static_cast<uint32_t>(info.type) == t) return &info;
  }
  return nullptr;
}

// "F32, F16, ..." for error messages.
const std::string& SupportedTensorTypes() {
  static const std::string* const names = [] {
    auto* out = new std::string;
    for (const TensorTypeInfo& info : kTensorTypes) {
      absl::StrAppend(out, out->empty() ? "" : ", ",
                      GgmlTypeName(static_cast<uint32_t>(info.type)));
    }
    return out;
  }();
  return *names;
}

}  // namespace

std::string GgmlTypeName(uint32_t t) {
  static constexpr const char* kNames[] = {
      "F32",     "F16",      "Q4_0",     "Q4_1",     "Q4_2",    "Q4_3",
      "Q5_0",    "Q5_1",     "Q8_0",     "Q8_1",     "Q2_K",    "Q3_K",
      "Q4_K",    "Q5_K",     "Q6_K",     "Q8_K",     "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S",    "IQ4_NL",   "IQ3_S",    "IQ2_S",   "IQ4_XS",
      "I8",      "I16",      "I32",      "I64",      "F64",     "IQ1_M",
      "BF16",    "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0"};
  if (t < sizeof(kNames) / sizeof(kNames[0])) return kNames[t];
  return absl::StrCat("type", t);
}

int64_t GgufTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

GgufFile::~GgufFile() {
  if (map_ != nullptr) munmap(map_, map_size_);
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string msg = absl::StrCat("open ", path, ": ", strerror(errno));
    if (errno == ENOENT) return absl::NotFoundError(msg);
    if (errno == EACCES) return absl::PermissionDeniedError(msg);
    return absl::UnavailableError(msg);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const std::string msg = absl::StrCat("stat ", path, ": ", strerror(errno));
    ::close(fd);
    return absl::UnavailableError(msg);
  }
  if (st.st_size <= 0) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is empty"));
  }
  void* map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat("mmap ", path, ": ", strerror(errno)));
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->map_ = map;
  file->map_size_ = st.st_size;
  file->base_ = static_cast<const uint8_t*>(map);
  file->size_ = st.st_size;
  if (absl::Status s = file->Parse(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(
    std::string bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->owned_ = std::move(bytes);
  file->base_ = reinterpret_cast<const uint8_t*>(file->owned_.data());
  file->size_ = file->owned_.size();
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

absl::Status GgufFile::Parse() {
  Cursor c(base_, size_);
  BRAID_ASSIGN_OR_RETURN(const Counts n, ParseHeader(c));
  BRAID_RETURN_IF_ERROR(ParseMetadata(c, n.n_kv));
  BRAID_RETURN_IF_ERROR(ReadAlignment());
  std::vector<RawTensor> raw(n.n_tensors);
  tensors_.reserve(n.n_tensors);
  for (RawTensor& r : raw) {
    BRAID_ASSIGN_OR_RETURN(r, ParseTensorInfo(c));
  }
  return PlaceTensorData(c.pos(), raw);
}

absl::StatusOr<GgufFile::Counts> GgufFile::ParseHeader(Cursor& c) {
  uint32_t magic = 0;
  BRAID_RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (magic != kMagic) {
    return absl::InvalidArgumentError("not a GGUF file (bad magic at byte 0)");
  }
  BRAID_RETURN_IF_ERROR(c.Read(&version_, "version"));
  if (version_ != 2 && version_ != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported GGUF version ", version_, " at byte 4 (need 2 or 3)"));
  }
  Counts n;
  BRAID_RETURN_IF_ERROR(c.Read(&n.n_tensors, "tensor count"));
  BRAID_RETURN_IF_ERROR(c.Read(&n.n_kv, "metadata count"));
  // Minimum encodings: kv = key length + type + 1 byte; tensor = name length +
  // n_dims + 1 dim + type + offset.
  if (n.n_kv > c.remaining() / 13) {
    return absl::DataLossError(absl::StrCat(
        "metadata count ", n.n_kv, " at byte 16 exceeds the file size"));
  }
  if (n.n_tensors > c.remaining() / 32) {
    return absl::DataLossError(absl::StrCat(
        "tensor count ", n.n_tensors, " at byte 8 exceeds the file size"));
  }
  return n;
}

absl::Status GgufFile::ParseMetadata(Cursor& c, uint64_t n_kv) {
  keys_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = c.pos();
    absl::string_view key;
    BRAID_RETURN_IF_ERROR(c.ReadString(&key, "metadata key"));
    uint32_t type = 0;
    BRAID_RETURN_IF_ERROR(c.Read(&type, "metadata value type"));
    const size_t value_offset = c.pos();
    BRAID_RETURN_IF_ERROR(SkipValue(c, type, key, 0));
    if (!kv_.emplace(std::string(key),
                     KvEntry{static_cast<GgufValueType>(type), value_offset})
             .second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate metadata key '", key, "' at byte ", at));
    }
    keys_.emplace_back(key);
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ReadAlignment() {
  if (!Has("general.alignment")) return absl::OkStatus();
  BRAID_ASSIGN_OR_RETURN(const int64_t a, GetInt("general.alignment"));
  if (a <= 0 || (a & (a - 1)) != 0 || a > (1 << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "general.alignment ", a, " is not a power of two in [1, 2^30]"));
  }
  alignment_ = static_cast<size_t>(a);
  return absl::OkStatus();
}

// One tensor's info: name, shape, type and data offset, each checked; the
// tensor appended to tensors_, where its info said its data lies returned.
absl::StatusOr<GgufFile::RawTensor> GgufFile::ParseTensorInfo(Cursor& c) {
  const size_t at = c.pos();
  absl::string_view name;
  BRAID_RETURN_IF_ERROR(c.ReadString(&name, "tensor name"));
  const std::string where =
      absl::StrCat("tensor '", name, "' (info at byte ", at, ")");
  uint32_t n_dims = 0;
  BRAID_RETURN_IF_ERROR(c.Read(&n_dims, "tensor n_dims"));
  if (n_dims == 0 || n_dims > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": n_dims ", n_dims, " not in [1, 4]"));
  }
  GgufTensor t;
  t.name = std::string(name);
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = 0;
    BRAID_RETURN_IF_ERROR(c.Read(&dim, "tensor dim"));
    if (dim == 0 ||
        dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dim ", d, " = ", dim, " is invalid"));
    }
    if (static_cast<int64_t>(dim) >
        std::numeric_limits<int64_t>::max() / n_elements) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": element count overflows"));
    }
    n_elements *= static_cast<int64_t>(dim);
    t.dims.push_back(static_cast<int64_t>(dim));
  }
  uint32_t type = 0;
  BRAID_RETURN_IF_ERROR(c.Read(&type, "tensor type"));
  const TensorTypeInfo* info = FindTensorType(type);
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unsupported tensor type ", GgmlTypeName(type),
                     " (", type, "); braid reads ", SupportedTensorTypes()));
  }
  t.type = info->type;
  const int64_t block = info->block, block_bytes = info->bytes;
  if (t.dims[0] % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": row length ", t.dims[0], " is not a multiple of the ",
        GgmlTypeName(type), " block size ", block));
  }
  const uint64_t n_blocks = static_cast<uint64_t>(n_elements / block);
  if (n_blocks > std::numeric_limits<uint64_t>::max() / block_bytes ||
      n_blocks * block_bytes > size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": data size exceeds the file size"));
  }
  t.size_bytes = n_blocks * block_bytes;
  uint64_t offset = 0;
  BRAID_RETURN_IF_ERROR(c.Read(&offset, "tensor offset"));
  if (offset % alignment_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": offset ", offset, " is not aligned to ", alignment_));
  }
  if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("duplicate tensor name '", name, "' at byte ", at));
  }
  tensors_.push_back(std::move(t));
  return RawTensor{offset, at};
}

// The data section starts at the next multiple of the alignment after the
// infos (info_end); every tensor's data must lie inside it, and no two
// tensors may share bytes.
absl::Status GgufFile::PlaceTensorData(size_t info_end,
                                       const std::vector<RawTensor>& raw) {
  const size_t data_start =
      (info_end + alignment_ - 1) / alignment_ * alignment_;
  if (!raw.empty() && (data_start < info_end || data_start > size_)) {
    return absl::DataLossError(
        absl::StrCat("truncated GGUF: tensor data section would start at byte ",
                     data_start, " of ", size_));
  }
  const uint64_t data_size = data_start <= size_ ? size_ - data_start : 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensor& t = tensors_[i];
    if (raw[i].offset > data_size || t.size_bytes > data_size - raw[i].offset) {
      return absl::DataLossError(
          absl::StrCat("tensor '", t.name, "' (info at byte ", raw[i].info_pos,
                       "): data [", raw[i].offset, ", +", t.size_bytes,
                       ") lies outside the ", data_size, "-byte data section"));
    }
    t.data = base_ + data_start + raw[i].offset;
  }
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return raw[a].offset < raw[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const size_t prev = order[i - 1], cur = order[i];
    if (raw[prev].offset + tensors_[prev].size_bytes > raw[cur].offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensors '", tensors_[prev].name, "' and '",
                       tensors_[cur].name, "' overlap"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const GgufFile::KvEntry*> GgufFile::Find(
    absl::string_view key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) {
    return absl::NotFoundError(absl::StrCat("GGUF key '", key, "' not found"));
  }
  return &it->second;
}

bool GgufFile::Has(std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  return kv_.contains(key);
}

absl::StatusOr<GgufValueType> GgufFile::GetType(std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  absl::StatusOr<const KvEntry*> e = Find(key);
  if (!e.ok()) return e.status();
  return (*e)->type;
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  absl::StatusOr<const KvEntry*> e = Find(key);
  if (!e.ok()) return e.status();
  if ((*e)->type != GgufValueType::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' is not a string"));
  }
  Cursor c(base_, size_, (*e)->value_offset);
  absl::string_view s;
  if (absl::Status st = c.ReadString(&s, key); !st.ok()) return st;
  return std::string(s);
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  absl::StatusOr<const KvEntry*> e = Find(key);
  if (!e.ok()) return e.status();
  Cursor c(base_, size_, (*e)->value_offset);
  return ReadInt(c, (*e)->type, key);
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  absl::StatusOr<const KvEntry*> e = Find(key);
  if (!e.ok()) return e.status();
  Cursor c(base_, size_, (*e)->value_offset);
  return ReadNumber(c, (*e)->type, key);
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  absl::StatusOr<const KvEntry*> e = Find(key);
  if (!e.ok()) return e.status();
  if ((*e)->type != GgufValueType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' is not a bool"));
  }
  return base_[(*e)->value_offset] != 0;
}

namespace {

// Positions a cursor at the first element of an array value and returns its
// element type and length.
absl::Status OpenArray(Cursor& c, absl::string_view key, GgufValueType type,
                       GgufValueType* elem_type, uint64_t* count) {
  if (type != GgufValueType::kArray) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' is not an array"));
  }
  uint32_t et = 0;
  if (absl::Status s = c.Read(&et, key); !s.ok()) return s;
  if (absl::Status s = c.Read(count, key); !s.ok()) return s;
  *elem_type = static_cast<GgufValueType>(et);
  return absl::OkStatus();
}

// Reads the array value at `c` (of type `type`) element by element with
// `read`, after `accepts` has checked the element type; `what` names the
// expected elements in the error ("strings", "integers", ...).
template <typename T, typename Accept, typename Read>
absl::StatusOr<std::vector<T>> ReadArray(Cursor c, absl::string_view key,
                                         GgufValueType type, Accept accepts,
                                         const char* what, Read read) {
  GgufValueType et = GgufValueType::kUint8;
  uint64_t n = 0;
  if (absl::Status s = OpenArray(c, key, type, &et, &n); !s.ok()) return s;
  if (!accepts(et)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' is not an array of ", what));
  }
  std::vector<T> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    absl::StatusOr<T> v = read(c, et);
    if (!v.ok()) return v.status();
    out.push_back(*std::move(v));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(
    std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  absl::StatusOr<const KvEntry*> e = Find(key);
  if (!e.ok()) return e.status();
  return ReadArray<std::string>(
      Cursor(base_, size_, (*e)->value_offset), key, (*e)->type,
      [](GgufValueType t) { return t == GgufValueType::kString; }, "strings",
      [key](Cursor& c, GgufValueType) -> absl::StatusOr<std::string> {
        absl::string_view s;
        if (absl::Status st = c.ReadString(&s, key); !st.ok()) return st;
        return std::string(s);
      });
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(
    std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  absl::StatusOr<const KvEntry*> e = Find(key);
  if (!e.ok()) return e.status();
  return ReadArray<int64_t>(
      Cursor(base_, size_, (*e)->value_offset), key, (*e)->type, IsIntType,
      "integers",
      [key](Cursor& c, GgufValueType t) { return ReadInt(c, t, key); });
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(
    std::string_view key_in) const {
  const absl::string_view key(key_in.data(), key_in.size());
  absl::StatusOr<const KvEntry*> e = Find(key);
  if (!e.ok()) return e.status();
  return ReadArray<float>(
      Cursor(base_, size_, (*e)->value_offset), key, (*e)->type,
      [](GgufValueType t) {
        return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64 ||
               IsIntType(t);
      },
      "numbers",
      [key](Cursor& c, GgufValueType t) -> absl::StatusOr<float> {
        absl::StatusOr<double> v = ReadNumber(c, t, key);
        if (!v.ok()) return v.status();
        return static_cast<float>(*v);
      });
}

const GgufTensor* GgufFile::FindTensor(std::string_view name_in) const {
  const absl::string_view name(name_in.data(), name_in.size());
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::ReleasePages(const void* p, size_t n) const {
  if (map_ == nullptr) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + n) / page * page;
  if (last > first) {
    madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  }
}

}  // namespace braid::model
