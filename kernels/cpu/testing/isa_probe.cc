// Prints the kernels' ISA level (CpuIsaName) after detection, for
// isa_env_test.sh: BRAID_CPU_ISA as the process sees it.
#include <cstdio>

#include "kernels/cpu/cpu_features.h"

int main() {
  std::printf("%s\n", braid::kernels::cpu::CpuIsaName());
  return 0;
}
