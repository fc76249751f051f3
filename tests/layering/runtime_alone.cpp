// Built with every object of kiln_runtime and nothing but the libraries the
// runtime declares (tests/CMakeLists.txt): that it links at all is the check
// that the runtime calls nothing of the code generator.
#include <cstdio>

int main() {
  std::puts("kiln_runtime links without the code generator");
  return 0;
}
