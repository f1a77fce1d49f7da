// Reads `<ggml type id> <n>` on the command line and n elements' blocks of
// that type on stdin; writes braid's dequantization (n f32, native order) to
// stdout; with --quantize, reads n f32 and writes braid's blocks instead.
// For tests/golden/quant_reference_test.py, which checks both against gguf-py.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/quant/quant.h"

namespace k = braid::kernels::cpu;

int main(int argc, char** argv) {
  const bool quantize = argc == 4 && std::strcmp(argv[3], "--quantize") == 0;
  if (argc != 3 && !quantize) {
    std::fprintf(stderr, "usage: %s TYPE_ID N [--quantize]\n", argv[0]);
    return 2;
  }
  const auto raw = static_cast<uint32_t>(std::atoi(argv[1]));
  const int64_t n = std::atoll(argv[2]);
  if (!k::IsKnownDType(raw)) {
    std::fprintf(stderr, "unknown type %u\n", raw);
    return 2;
  }
  const auto type = static_cast<k::DType>(raw);
  if (n <= 0 || n % k::DTypeBlockSize(type) != 0) {
    std::fprintf(stderr, "n must be a positive multiple of the block size\n");
    return 2;
  }
  std::vector<uint8_t> blocks(k::DTypeRowBytes(type, n));
  std::vector<float> values(n);
  void* in = quantize ? static_cast<void*>(values.data()) : blocks.data();
  const size_t in_bytes = quantize ? n * sizeof(float) : blocks.size();
  if (std::fread(in, 1, in_bytes, stdin) != in_bytes) {
    std::fprintf(stderr, "short input\n");
    return 2;
  }
  if (quantize) {
    k::QuantizeRow(type, values.data(), blocks.data(), n);
    std::fwrite(blocks.data(), 1, blocks.size(), stdout);
  } else {
    k::DequantizeRow(type, blocks.data(), values.data(), n);
    std::fwrite(values.data(), sizeof(float), n, stdout);
  }
  return 0;
}
