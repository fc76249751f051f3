#include "ir/float_status.h"

namespace kiln {
namespace {

thread_local uint32_t thread_status = 0;

} // namespace

void raiseFloatStatus() { thread_status |= kFloatStatusOverflow; }

uint32_t takeFloatStatus() {
  const uint32_t status = thread_status;
  thread_status = 0;
  return status;
}

} // namespace kiln
