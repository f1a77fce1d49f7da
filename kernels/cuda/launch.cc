#include "kernels/cuda/launch.h"

#include <atomic>

namespace braid::kernels::cuda {
namespace {
std::atomic<bool> dependent_launch{false};
}  // namespace

void SetDependentLaunch(bool on) {
  dependent_launch.store(on, std::memory_order_relaxed);
}

bool DependentLaunch() {
  return dependent_launch.load(std::memory_order_relaxed);
}

}  // namespace braid::kernels::cuda
