// An LD_PRELOAD library that makes the filesystem one which opens files with O_DIRECT but refuses
// their O_DIRECT writes (EINVAL), as some do whose alignment exceeds the 4 KiB H2 pads to (Lustre
// on 64 KiB-page nodes, for one). Every other write passes through unchanged. The checkpoint
// tests run again under it (tests/train/checkpoint/CMakeLists.txt), so that the writer's fallback
// to the page cache is exercised on any disk.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

extern "C" ssize_t write(int fd, const void* data, size_t bytes) {
  using Write = ssize_t (*)(int, const void*, size_t);
  static const Write real = reinterpret_cast<Write>(dlsym(RTLD_NEXT, "write"));
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_DIRECT) != 0) {
    errno = EINVAL;
    return -1;
  }
  return real(fd, data, bytes);
}
