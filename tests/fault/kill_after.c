/* A fault injector for lathe's crash tests (tools/fault_kill.py): preloaded into a lathe process
 * (LD_PRELOAD), it counts the calls that change the file system -- creating, writing, syncing,
 * truncating, renaming, linking and removing files and directories -- and kills the process with
 * SIGKILL right after the k-th one returns, k from LATHE_KILL_AFTER. So a test can stop a command
 * after every write phase in turn, not at a few delays that hit phases by chance. With
 * LATHE_KILL_COUNT=FILE and no LATHE_KILL_AFTER, it only counts, and writes the count to FILE at
 * exit (the number of kill points of that command).
 *
 * Writes to the standard streams (fds 0-2 and stdin/stdout/stderr: progress lines, messages) are
 * not counted: they change no file of lathe's. Calls that glibc makes to itself (remove() calling
 * unlink, fflush() calling write) are not seen, which is why remove() and the stdio calls that
 * write (fopen for writing, fwrite, fflush, fclose) are counted themselves. Lives in tests/: no
 * lathe build ever loads it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long kill_after = -1; /* -1: count only */
static long calls = 0;
static const char* count_file = NULL;

__attribute__((constructor)) static void start(void) {
  const char* k = getenv("LATHE_KILL_AFTER");
  if (k && *k) kill_after = atol(k);
  count_file = getenv("LATHE_KILL_COUNT");
}

__attribute__((destructor)) static void finish(void) {
  if (!count_file || !*count_file) return;
  FILE* f = fopen(count_file, "w");
  if (!f) return;
  fprintf(f, "%ld\n", calls);
  fclose(f);
}

/* One more call done: the k-th is the last. */
static void counted(void) {
  if (++calls == kill_after) raise(SIGKILL);
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static int writes_file(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
  }
  const int fd = REAL(open)(path, flags, mode);
  if (writes_file(flags)) counted();
  return fd;
}
int open64(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
  }
  const int fd = REAL(open64)(path, flags, mode);
  if (writes_file(flags)) counted();
  return fd;
}
int openat(int dir, const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
  }
  const int fd = REAL(openat)(dir, path, flags, mode);
  if (writes_file(flags)) counted();
  return fd;
}

#define COUNTED(ret, name, params, args) \
  ret name params {                      \
    const ret r = REAL(name) args;       \
    counted();                           \
    return r;                            \
  }
#define COUNTED_FD(ret, name, params, args) \
  ret name params {                         \
    const ret r = REAL(name) args;          \
    if (fd > 2) counted();                  \
    return r;                               \
  }

COUNTED_FD(ssize_t, write, (int fd, const void* buf, size_t n), (fd, buf, n))
COUNTED_FD(ssize_t, pwrite, (int fd, const void* buf, size_t n, off_t off), (fd, buf, n, off))
COUNTED_FD(ssize_t, pwrite64, (int fd, const void* buf, size_t n, off64_t off), (fd, buf, n, off))
COUNTED_FD(ssize_t, writev, (int fd, const struct iovec* iov, int n), (fd, iov, n))
COUNTED_FD(int, fsync, (int fd), (fd))
COUNTED_FD(int, fdatasync, (int fd), (fd))
COUNTED_FD(int, ftruncate, (int fd, off_t len), (fd, len))
COUNTED_FD(int, ftruncate64, (int fd, off64_t len), (fd, len))
COUNTED(int, creat, (const char* path, mode_t mode), (path, mode))
COUNTED(int, rename, (const char* a, const char* b), (a, b))
COUNTED(int, renameat, (int da, const char* a, int db, const char* b), (da, a, db, b))
COUNTED(int, renameat2, (int da, const char* a, int db, const char* b, unsigned flags), (da, a, db, b, flags))
COUNTED(int, link, (const char* a, const char* b), (a, b))
COUNTED(int, linkat, (int da, const char* a, int db, const char* b, int flags), (da, a, db, b, flags))
COUNTED(int, symlink, (const char* a, const char* b), (a, b))
COUNTED(int, unlink, (const char* path), (path))
COUNTED(int, unlinkat, (int dir, const char* path, int flags), (dir, path, flags))
COUNTED(int, remove, (const char* path), (path))
COUNTED(int, mkdir, (const char* path, mode_t mode), (path, mode))
COUNTED(int, mkdirat, (int dir, const char* path, mode_t mode), (dir, path, mode))
COUNTED(int, rmdir, (const char* path), (path))

static int standard(FILE* f) { return f == NULL || f == stdin || f == stdout || f == stderr; }

FILE* fopen(const char* path, const char* mode) {
  FILE* f = REAL(fopen)(path, mode);
  if (strpbrk(mode, "wa+")) counted();
  return f;
}
FILE* fopen64(const char* path, const char* mode) {
  FILE* f = REAL(fopen64)(path, mode);
  if (strpbrk(mode, "wa+")) counted();
  return f;
}
size_t fwrite(const void* p, size_t size, size_t n, FILE* f) {
  const size_t r = REAL(fwrite)(p, size, n, f);
  if (!standard(f)) counted();
  return r;
}
int fflush(FILE* f) {
  const int r = REAL(fflush)(f);
  if (!standard(f)) counted();
  return r;
}
int fclose(FILE* f) {
  const int is_standard = standard(f);
  const int r = REAL(fclose)(f);
  if (!is_standard) counted();
  return r;
}
