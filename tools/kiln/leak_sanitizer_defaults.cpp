// LeakSanitizer defaults for the kiln binary of a sanitizer build
// (KILN_SANITIZE, scripts/sanitize.sh); an empty file in other builds.
//
// OpenMPI frees neither what MPI_Init allocates nor what its plugins do, and
// its libraries have no frame pointers, so the fast unwinder stops one frame
// into them and no suppression by library name can match. Under mpirun, and
// only there because it costs about five times the run time, kiln takes the
// slow unwinder, which sees the OpenMPI frames these suppressions name.
#if defined(__SANITIZE_ADDRESS__)
#define KILN_LEAK_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_LEAK_SANITIZER 1
#endif
#endif

#ifdef KILN_LEAK_SANITIZER
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

// Whether mpirun started this process: it sets OMPI_COMM_WORLD_SIZE. ASan
// asks for its options before libc has set up getenv() and before its own
// interceptors work, so this reads /proc/self/environ with raw system calls
// and compares by hand, uninstrumented: the shadow memory is not mapped yet.
__attribute__((no_sanitize("address", "undefined"))) bool startedByMpirun() {
  static char env[1 << 18];
  const long fd = ::syscall(SYS_openat, AT_FDCWD, "/proc/self/environ", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  long size = 0;
  while (size < long(sizeof(env))) {
    const long n = ::syscall(SYS_read, fd, env + size, sizeof(env) - size);
    if (n <= 0)
      break;
    size += n;
  }
  ::syscall(SYS_close, fd);
  static const char kName[] = "OMPI_COMM_WORLD_SIZE=";
  for (long start = 0; start < size;) {
    long i = 0;
    while (kName[i] != '\0' && start + i < size && env[start + i] == kName[i])
      ++i;
    if (kName[i] == '\0')
      return true;
    while (start < size && env[start] != '\0')
      ++start;
    ++start;
  }
  return false;
}

} // namespace

// A common flag: ASan, which records each allocation's stack, reads it from
// its own options.
extern "C" const char *__asan_default_options() {
  return startedByMpirun() ? "fast_unwind_on_malloc=0" : "";
}

extern "C" const char *__lsan_default_suppressions() {
  return "leak:libmpi.so\n"
         "leak:libopen-pal.so\n"
         "leak:libopen-rte.so\n"
         "leak:libpmix.so\n"
         "leak:libevent\n"
         "leak:libhwloc.so\n";
}
#endif
