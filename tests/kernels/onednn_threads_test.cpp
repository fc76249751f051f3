// keepOneDnnOnThisThread reaches oneDNN's OpenMP runtime, found at run time:
// after it the calling thread's OpenMP team is one thread, and another
// thread's setting is its own.
#include <dlfcn.h>

#include <thread>

#include <gtest/gtest.h>

#include "kernels/gemm.h"

namespace kiln::kernels {
namespace {

int ompMaxThreads() {
  using GetThreads = int (*)();
  const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return get ? get() : -1;
}

TEST(OneDnnThreads, TheCallingThreadsTeamIsOneThread) {
  ASSERT_NE(ompMaxThreads(), -1) << "oneDNN's OpenMP runtime is not loaded";
  std::thread([] {
    keepOneDnnOnThisThread();
    EXPECT_EQ(ompMaxThreads(), 1);
  }).join();
}

} // namespace
} // namespace kiln::kernels
