// --device's parsing in a braidd built without the CUDA executor (the
// default build; tools/gpu/check.sh runs braidd --device=cuda on a GPU).
#include "server/load_model.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::server {
namespace {

using ::testing::HasSubstr;

absl::Status LoadOn(const std::string& device) {
  DaemonFlags flags;
  flags.device = device;
  flags.model_path = "/nonexistent.gguf";
  return LoadModel(flags).status();
}

TEST(LoadModelTest, CudaWithoutTheExecutorSaysHowToBuildIt) {
  for (const char* device : {"cuda", "cuda:0", "cuda:3"}) {
    absl::Status st = LoadOn(device);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << device;
    EXPECT_THAT(st.message(), HasSubstr("--config=cuda")) << device;
  }
}

TEST(LoadModelTest, BadDevicesAreInvalid) {
  for (const char* device : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"}) {
    absl::Status st = LoadOn(device);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << device;
    EXPECT_THAT(st.message(), HasSubstr("cpu, auto or cuda[:N]")) << device;
  }
}

TEST(LoadModelTest, CpuAndAutoGoOnToTheFile) {
  // Both load on the CPU here: the missing file is the error.
  for (const char* device : {"cpu", "auto"}) {
    EXPECT_EQ(LoadOn(device).code(), absl::StatusCode::kNotFound) << device;
  }
}

}  // namespace
}  // namespace braid::server
