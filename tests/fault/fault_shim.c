/* An LD_PRELOAD shim for fault injection and write recording (tests only; never installed).
 *
 * It wraps the calls through which a run changes files, by family:
 *   pwrite     pwrite pwrite64 pwritev pwritev64 pwritev2
 *   write      write writev
 *   fsync      fsync
 *   fdatasync  fdatasync
 *   msync      msync
 *   rename     rename renameat renameat2
 *   ftruncate  ftruncate ftruncate64 truncate truncate64
 *   fallocate  fallocate fallocate64 posix_fallocate posix_fallocate64
 *   open       open open64 openat openat64 creat creat64 __open_2 __open64_2 __openat_2 __openat64_2
 *   mmap       mmap mmap64 (file mappings only: an anonymous mapping is memory, not I/O)
 *   close      close (the fd is released either way, as Linux's close does)
 *   unlink     unlink unlinkat
 *   link       link linkat
 *
 * Environment:
 *   OOC_FAULT_CALL=FAMILY      the family to fail (one of the names above)
 *   OOC_FAULT_NTH=N            fail its Nth call (1-based) ...
 *   OOC_FAULT_STICKY=1         ... and every later one (a full disk)
 *   OOC_FAULT_ERRNO=EIO        the errno of a failed call (a name or a number; default EIO)
 *   OOC_FAULT_SHORT=1          instead of failing, the Nth pwrite/write writes half its bytes
 *                              and returns the short count (a legal partial write)
 *   OOC_FAULT_PATH_SUBSTR=S    only count (and fail, and record) calls on files whose absolute
 *                              path contains S (the path of an fd is read from /proc/self/fd)
 *   OOC_FAULT_COUNT_FILE=path  appended: "inject FAMILY N ERRNO PATH" when a fault is injected
 *                              (at once, so a crash after it still tells), and at exit
 *                              "count FAMILY N" for every family, then "exit"
 *   OOC_FAULT_RECORD=logfile   appends every mutating call, in order (see record() below)
 *
 * A failed call returns -1 with errno set (mmap: MAP_FAILED; posix_fallocate: the error
 * number) and does not reach the kernel (close excepted). Calls made before the shim's
 * constructor ran are passed through uncounted. Counters are atomics, the log and the
 * mapping table are behind mutexes, and the shim's own I/O goes through syscall(), so it
 * never counts or records itself.
 *
 * Record format: one text line per call, fields separated by tabs, then, where the line ends
 * with "len=L", exactly L raw bytes and a newline:
 *   open   path=P flags=F ino=I dev=D
 *   pwrite ino=I path=P off=O len=L          (write: off=-1 means at the end, O_APPEND)
 *   mwrite ino=I path=P off=O len=L          (bytes of a shared writable mapping, taken at
 *                                             msync, munmap, or an fsync of its file)
 *   msync  ino=I path=P off=O size=S sync=1  (sync=0 for MS_ASYNC)
 *   ftruncate ino=I path=P size=S
 *   fallocate ino=I path=P mode=M off=O size=S
 *   rename from=P to=Q flags=F
 *   unlink path=P flags=F
 *   link   from=P to=Q
 *   fsync  ino=I path=P dir=0|1              (fdatasync: the same, op fdatasync)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum family { F_PWRITE, F_WRITE, F_FSYNC, F_FDATASYNC, F_MSYNC, F_RENAME, F_FTRUNCATE, F_FALLOCATE,
              F_OPEN, F_MMAP, F_CLOSE, F_UNLINK, F_LINK, F_COUNT };
static const char* const family_names[F_COUNT] = {"pwrite", "write", "fsync", "fdatasync", "msync",
                                                  "rename", "ftruncate", "fallocate", "open", "mmap",
                                                  "close", "unlink", "link"};

static atomic_long counts[F_COUNT];
static atomic_long injected;
static int initialised;
static int target = -1;
static long nth;
static int sticky;
static int short_write;
static int fault_errno = EIO;
static const char* path_filter;
static const char* count_file;
static int record_fd = -1;
static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the real functions ---------------------------------------------------------------- */

static void* real(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (!f) {
    static const char msg[] = "ooc_fault_shim: dlsym failed\n";
    syscall(SYS_write, 2, msg, sizeof msg - 1);
    abort();
  }
  return f;
}
#define REAL(type, name) \
  static __typeof__(name)* real_##name; \
  if (!real_##name) real_##name = (__typeof__(name)*)real(#name)

/* ---- small helpers, no libc I/O ---------------------------------------------------------- */

static void raw_write_all(int fd, const void* data, size_t size) {
  const char* p = data;
  while (size > 0) {
    long n = syscall(SYS_write, fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    size -= (size_t)n;
  }
}

static void fd_path(int fd, char* buf, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  long n = syscall(SYS_readlink, link, buf, size - 1);
  if (n < 0) n = 0;
  buf[n] = 0;
}

static void abs_path(int dirfd, const char* path, char* out, size_t size) {
  if (!path) {
    out[0] = 0;
    return;
  }
  if (path[0] == '/') {
    snprintf(out, size, "%s", path);
    return;
  }
  char base[PATH_MAX];
  if (dirfd == AT_FDCWD) {
    if (syscall(SYS_getcwd, base, sizeof base) < 0) base[0] = 0;
  } else {
    fd_path(dirfd, base, sizeof base);
  }
  snprintf(out, size, "%s/%s", base, path);
}

static int matches(const char* path) { return !path_filter || (path && strstr(path, path_filter)); }

static void append_line(const char* file, const char* line) {
  if (!file) return;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  raw_write_all(fd, line, strlen(line));
  syscall(SYS_close, fd);
}

/* True if this call (of family `fam`, on `path`) is to fail. Counts it when it matches. */
static int should_fail(int fam, const char* path) {
  if (!initialised || !matches(path)) return 0;
  long n = atomic_fetch_add(&counts[fam], 1) + 1;
  if (fam != target || nth <= 0) return 0;
  if (n == nth || (sticky && n > nth)) {
    atomic_fetch_add(&injected, 1);
    char line[PATH_MAX + 128];
    snprintf(line, sizeof line, "inject %s %ld %d %s\n", family_names[fam], n, fault_errno, path ? path : "-");
    append_line(count_file, line);
    return 1;
  }
  return 0;
}

/* Whether a call on `fd` needs its path: for the filter or for the log. */
static int want_path(void) { return initialised && (path_filter || record_fd >= 0); }

/* ---- the log ------------------------------------------------------------------------------ */

static void record(const char* header, const void* data, size_t size) {
  if (record_fd < 0) return;
  pthread_mutex_lock(&record_lock);
  raw_write_all(record_fd, header, strlen(header));
  raw_write_all(record_fd, "\n", 1);
  if (data) {
    raw_write_all(record_fd, data, size);
    raw_write_all(record_fd, "\n", 1);
  }
  pthread_mutex_unlock(&record_lock);
}

static int recording(const char* path) { return initialised && record_fd >= 0 && matches(path); }

static void fd_ident(int fd, unsigned long* ino, unsigned long* dev, int* is_dir) {
  struct stat st;
  if (syscall(SYS_fstat, fd, &st) != 0) {
    *ino = *dev = 0;
    *is_dir = 0;
    return;
  }
  *ino = (unsigned long)st.st_ino;
  *dev = (unsigned long)st.st_dev;
  *is_dir = S_ISDIR(st.st_mode);
}

/* Shared writable file mappings, so that msync/munmap/fsync can log what the mapping wrote. */
struct mapping {
  char* addr;
  size_t size;
  off_t offset;
  unsigned long ino;
  char path[PATH_MAX];
};
#define MAX_MAPPINGS 256
static struct mapping mappings[MAX_MAPPINGS];
static int mapping_count;
static pthread_mutex_t mapping_lock = PTHREAD_MUTEX_INITIALIZER;

static void log_mapped(const struct mapping* m, char* first, char* last) {
  char header[PATH_MAX + 128];
  snprintf(header, sizeof header, "mwrite\tino=%lu\tpath=%s\toff=%lld\tlen=%zu", m->ino, m->path,
           (long long)(m->offset + (first - m->addr)), (size_t)(last - first));
  record(header, first, (size_t)(last - first));
}

/* ---- init / exit -------------------------------------------------------------------------- */

static int errno_by_name(const char* s) {
  static const struct { const char* name; int value; } names[] = {
      {"EIO", EIO}, {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EROFS", EROFS}, {"EINTR", EINTR},
      {"EAGAIN", EAGAIN}, {"ENOMEM", ENOMEM}, {"EACCES", EACCES}, {"EPERM", EPERM}, {"EBADF", EBADF},
      {"EFBIG", EFBIG}, {"EINVAL", EINVAL}, {"EMFILE", EMFILE}, {"ENFILE", ENFILE}, {"ENOENT", ENOENT},
      {"EEXIST", EEXIST}, {"EXDEV", EXDEV}, {"ENODEV", ENODEV}, {"ETIMEDOUT", ETIMEDOUT},
      {"EOPNOTSUPP", EOPNOTSUPP}, {"ENOTSUP", ENOTSUP}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (strcmp(s, names[i].name) == 0) return names[i].value;
  int v = atoi(s);
  return v > 0 ? v : EIO;
}

__attribute__((constructor)) static void shim_init(void) {
  const char* call = getenv("OOC_FAULT_CALL");
  if (call)
    for (int i = 0; i < F_COUNT; ++i)
      if (strcmp(call, family_names[i]) == 0) target = i;
  if (call && target < 0) {
    static const char msg[] = "ooc_fault_shim: unknown OOC_FAULT_CALL\n";
    syscall(SYS_write, 2, msg, sizeof msg - 1);
  }
  const char* s = getenv("OOC_FAULT_NTH");
  nth = s ? atol(s) : 0;
  s = getenv("OOC_FAULT_STICKY");
  sticky = s && *s && strcmp(s, "0") != 0;
  s = getenv("OOC_FAULT_SHORT");
  short_write = s && *s && strcmp(s, "0") != 0;
  s = getenv("OOC_FAULT_ERRNO");
  if (s && *s) fault_errno = errno_by_name(s);
  s = getenv("OOC_FAULT_PATH_SUBSTR");
  path_filter = s && *s ? s : NULL;
  s = getenv("OOC_FAULT_COUNT_FILE");
  count_file = s && *s ? s : NULL;
  s = getenv("OOC_FAULT_RECORD");
  if (s && *s) record_fd = (int)syscall(SYS_openat, AT_FDCWD, s, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  initialised = 1;
}

__attribute__((destructor)) static void shim_exit(void) {
  if (!initialised || !count_file) return;
  char text[F_COUNT * 48 + 64];
  size_t used = 0;
  for (int i = 0; i < F_COUNT; ++i)
    used += (size_t)snprintf(text + used, sizeof text - used, "count %s %ld\n", family_names[i],
                             atomic_load(&counts[i]));
  snprintf(text + used, sizeof text - used, "exit %ld\n", atomic_load(&injected));
  append_line(count_file, text);
}

/* ---- pwrite / write ------------------------------------------------------------------------ */

static void log_write(const char* op, int fd, const char* path, long long off, const void* data, size_t n) {
  unsigned long ino, dev;
  int dir;
  fd_ident(fd, &ino, &dev, &dir);
  char header[PATH_MAX + 128];
  snprintf(header, sizeof header, "%s\tino=%lu\tpath=%s\toff=%lld\tlen=%zu", op, ino, path, off, n);
  record(header, data, n);
}

/* Gathers an iovec's first `n` bytes, for the log. */
static void log_writev(int fd, const char* path, long long off, const struct iovec* iov, int cnt, size_t n) {
  char* buf = malloc(n ? n : 1);
  if (!buf) return;
  size_t done = 0;
  for (int i = 0; i < cnt && done < n; ++i) {
    size_t take = iov[i].iov_len < n - done ? iov[i].iov_len : n - done;
    memcpy(buf + done, iov[i].iov_base, take);
    done += take;
  }
  log_write("pwrite", fd, path, off, buf, n);
  free(buf);
}

static long long write_offset(int fd) {
  int fl = (int)syscall(SYS_fcntl, fd, F_GETFL);
  if (fl >= 0 && (fl & O_APPEND)) return -1;
  return (long long)syscall(SYS_lseek, fd, 0, SEEK_CUR);
}

#define PATH_OF(fd) \
  char path_[PATH_MAX]; \
  const char* path = NULL; \
  if (want_path()) { fd_path((fd), path_, sizeof path_); path = path_; }

#define DEFINE_PWRITE(name, offtype) \
  EXPORT ssize_t name(int fd, const void* buf, size_t count, offtype offset) { \
    REAL(ssize_t (*)(int, const void*, size_t, offtype), name); \
    PATH_OF(fd); \
    if (should_fail(F_PWRITE, path)) { \
      if (!short_write || count < 2) { errno = fault_errno; return -1; } \
      count /= 2; \
    } \
    ssize_t n = real_##name(fd, buf, count, offset); \
    if (n > 0 && recording(path)) log_write("pwrite", fd, path, (long long)offset, buf, (size_t)n); \
    return n; \
  }
DEFINE_PWRITE(pwrite, off_t)
DEFINE_PWRITE(pwrite64, off64_t)

#define DEFINE_PWRITEV(name, offtype) \
  EXPORT ssize_t name(int fd, const struct iovec* iov, int cnt, offtype offset) { \
    REAL(ssize_t (*)(int, const struct iovec*, int, offtype), name); \
    PATH_OF(fd); \
    if (should_fail(F_PWRITE, path)) { errno = fault_errno; return -1; } \
    ssize_t n = real_##name(fd, iov, cnt, offset); \
    if (n > 0 && recording(path)) log_writev(fd, path, (long long)offset, iov, cnt, (size_t)n); \
    return n; \
  }
DEFINE_PWRITEV(pwritev, off_t)
DEFINE_PWRITEV(pwritev64, off64_t)

EXPORT ssize_t pwritev2(int fd, const struct iovec* iov, int cnt, off_t offset, int flags) {
  REAL(ssize_t (*)(int, const struct iovec*, int, off_t, int), pwritev2);
  PATH_OF(fd);
  if (should_fail(F_PWRITE, path)) { errno = fault_errno; return -1; }
  long long off = offset == -1 ? write_offset(fd) : (long long)offset;
  ssize_t n = real_pwritev2(fd, iov, cnt, offset, flags);
  if (n > 0 && recording(path)) log_writev(fd, path, off, iov, cnt, (size_t)n);
  return n;
}

EXPORT ssize_t write(int fd, const void* buf, size_t count) {
  REAL(ssize_t (*)(int, const void*, size_t), write);
  PATH_OF(fd);
  if (should_fail(F_WRITE, path)) {
    if (!short_write || count < 2) { errno = fault_errno; return -1; }
    count /= 2;
  }
  long long off = recording(path) ? write_offset(fd) : 0;
  ssize_t n = real_write(fd, buf, count);
  if (n > 0 && recording(path)) log_write("pwrite", fd, path, off, buf, (size_t)n);
  return n;
}

EXPORT ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  REAL(ssize_t (*)(int, const struct iovec*, int), writev);
  PATH_OF(fd);
  if (should_fail(F_WRITE, path)) { errno = fault_errno; return -1; }
  long long off = recording(path) ? write_offset(fd) : 0;
  ssize_t n = real_writev(fd, iov, cnt);
  if (n > 0 && recording(path)) log_writev(fd, path, off, iov, cnt, (size_t)n);
  return n;
}

/* ---- fsync / fdatasync ------------------------------------------------------------------------ */

/* Before a sync of a file, what its shared mappings hold is part of what reaches the disk. */
static void log_mappings_of(unsigned long ino) {
  pthread_mutex_lock(&mapping_lock);
  for (int i = 0; i < mapping_count; ++i)
    if (mappings[i].ino == ino) log_mapped(&mappings[i], mappings[i].addr, mappings[i].addr + mappings[i].size);
  pthread_mutex_unlock(&mapping_lock);
}

static void log_sync(const char* op, int fd, const char* path) {
  unsigned long ino, dev;
  int dir;
  fd_ident(fd, &ino, &dev, &dir);
  if (!dir) log_mappings_of(ino);
  char header[PATH_MAX + 128];
  snprintf(header, sizeof header, "%s\tino=%lu\tpath=%s\tdir=%d", op, ino, path, dir);
  record(header, NULL, 0);
}

EXPORT int fsync(int fd) {
  REAL(int (*)(int), fsync);
  PATH_OF(fd);
  if (should_fail(F_FSYNC, path)) { errno = fault_errno; return -1; }
  int r = real_fsync(fd);
  if (r == 0 && recording(path)) log_sync("fsync", fd, path);
  return r;
}

EXPORT int fdatasync(int fd) {
  REAL(int (*)(int), fdatasync);
  PATH_OF(fd);
  if (should_fail(F_FDATASYNC, path)) { errno = fault_errno; return -1; }
  int r = real_fdatasync(fd);
  if (r == 0 && recording(path)) log_sync("fdatasync", fd, path);
  return r;
}

/* ---- mmap / msync / munmap ------------------------------------------------------------------- */

#define DEFINE_MMAP(name, offtype) \
  EXPORT void* name(void* addr, size_t len, int prot, int flags, int fd, offtype off) { \
    REAL(void* (*)(void*, size_t, int, int, int, offtype), name); \
    if (fd < 0 || (flags & MAP_ANONYMOUS)) return real_##name(addr, len, prot, flags, fd, off); \
    PATH_OF(fd); \
    if (should_fail(F_MMAP, path)) { errno = fault_errno; return MAP_FAILED; } \
    void* p = real_##name(addr, len, prot, flags, fd, off); \
    if (p != MAP_FAILED && recording(path) && (prot & PROT_WRITE) && (flags & MAP_SHARED)) { \
      unsigned long ino, dev; \
      int dir; \
      fd_ident(fd, &ino, &dev, &dir); \
      pthread_mutex_lock(&mapping_lock); \
      if (mapping_count < MAX_MAPPINGS) { \
        struct mapping* m = &mappings[mapping_count++]; \
        m->addr = p; m->size = len; m->offset = (off_t)off; m->ino = ino; \
        snprintf(m->path, sizeof m->path, "%s", path); \
      } \
      pthread_mutex_unlock(&mapping_lock); \
    } \
    return p; \
  }
DEFINE_MMAP(mmap, off_t)
DEFINE_MMAP(mmap64, off64_t)

/* Logs the part of [first, last) each mapping covers, then calls `after` for it. */
static void for_mapped(char* first, char* last, int drop, int sync_flag, int sync_logged) {
  pthread_mutex_lock(&mapping_lock);
  for (int i = 0; i < mapping_count; ++i) {
    struct mapping* m = &mappings[i];
    char* lo = first > m->addr ? first : m->addr;
    char* hi = last < m->addr + m->size ? last : m->addr + m->size;
    if (lo >= hi) continue;
    log_mapped(m, lo, hi);
    if (sync_logged) {
      char header[PATH_MAX + 128];
      snprintf(header, sizeof header, "msync\tino=%lu\tpath=%s\toff=%lld\tsize=%zu\tsync=%d", m->ino, m->path,
               (long long)(m->offset + (lo - m->addr)), (size_t)(hi - lo), sync_flag);
      record(header, NULL, 0);
    }
    if (drop) {
      if (lo == m->addr && hi == m->addr + m->size) {
        mappings[i] = mappings[--mapping_count];
        --i;
      } else if (lo == m->addr) {
        m->offset += hi - m->addr;
        m->size -= (size_t)(hi - m->addr);
        m->addr = hi;
      } else if (hi == m->addr + m->size) {
        m->size = (size_t)(lo - m->addr);
      }
    }
  }
  pthread_mutex_unlock(&mapping_lock);
}

/* The path of the file mapped at `addr`, if the table knows it (only in record mode). */
static int mapped_path(void* addr, char* out, size_t size) {
  int found = 0;
  pthread_mutex_lock(&mapping_lock);
  for (int i = 0; i < mapping_count && !found; ++i)
    if ((char*)addr >= mappings[i].addr && (char*)addr < mappings[i].addr + mappings[i].size) {
      snprintf(out, size, "%s", mappings[i].path);
      found = 1;
    }
  pthread_mutex_unlock(&mapping_lock);
  return found;
}

/* Without the table (not recording), the file behind an address, from /proc/self/maps. */
static int maps_path(void* addr, char* out, size_t size) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[8192];
  char line[PATH_MAX + 256];
  size_t used = 0;
  int found = 0;
  unsigned long a = (unsigned long)addr;
  for (;;) {
    long n = syscall(SYS_read, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long i = 0; i < n && !found; ++i) {
      if (buf[i] != '\n') {
        if (used < sizeof line - 1) line[used++] = buf[i];
        continue;
      }
      line[used] = 0;
      used = 0;
      unsigned long lo, hi;
      if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) {
        const char* slash = strchr(line, '/');
        snprintf(out, size, "%s", slash ? slash : "");
        found = 1;
      }
    }
    if (found) break;
  }
  syscall(SYS_close, fd);
  return found;
}

EXPORT int msync(void* addr, size_t len, int flags) {
  REAL(int (*)(void*, size_t, int), msync);
  char path_[PATH_MAX];
  const char* path = NULL;
  if (want_path()) {
    if (!mapped_path(addr, path_, sizeof path_) && !maps_path(addr, path_, sizeof path_)) path_[0] = 0;
    path = path_;
  }
  if (should_fail(F_MSYNC, path)) { errno = fault_errno; return -1; }
  int r = real_msync(addr, len, flags);
  if (r == 0 && initialised && record_fd >= 0)
    for_mapped((char*)addr, (char*)addr + len, 0, (flags & MS_SYNC) ? 1 : 0, 1);
  return r;
}

EXPORT int munmap(void* addr, size_t len) {
  REAL(int (*)(void*, size_t), munmap);
  if (initialised && record_fd >= 0 && mapping_count > 0) for_mapped((char*)addr, (char*)addr + len, 1, 0, 0);
  return real_munmap(addr, len);
}

/* ---- ftruncate / fallocate ---------------------------------------------------------------- */

static void log_size(const char* op, int fd, const char* path, int mode, long long off, long long size) {
  unsigned long ino, dev;
  int dir;
  fd_ident(fd, &ino, &dev, &dir);
  char header[PATH_MAX + 160];
  if (strcmp(op, "ftruncate") == 0)
    snprintf(header, sizeof header, "ftruncate\tino=%lu\tpath=%s\tsize=%lld", ino, path, size);
  else
    snprintf(header, sizeof header, "fallocate\tino=%lu\tpath=%s\tmode=%d\toff=%lld\tsize=%lld", ino, path, mode,
             off, size);
  record(header, NULL, 0);
}

#define DEFINE_FTRUNCATE(name, offtype) \
  EXPORT int name(int fd, offtype length) { \
    REAL(int (*)(int, offtype), name); \
    PATH_OF(fd); \
    if (should_fail(F_FTRUNCATE, path)) { errno = fault_errno; return -1; } \
    int r = real_##name(fd, length); \
    if (r == 0 && recording(path)) log_size("ftruncate", fd, path, 0, 0, (long long)length); \
    return r; \
  }
DEFINE_FTRUNCATE(ftruncate, off_t)
DEFINE_FTRUNCATE(ftruncate64, off64_t)

#define DEFINE_TRUNCATE(name, offtype) \
  EXPORT int name(const char* file, offtype length) { \
    REAL(int (*)(const char*, offtype), name); \
    char full[PATH_MAX]; \
    abs_path(AT_FDCWD, file, full, sizeof full); \
    if (should_fail(F_FTRUNCATE, full)) { errno = fault_errno; return -1; } \
    int r = real_##name(file, length); \
    if (r == 0 && recording(full)) { \
      int fd = (int)syscall(SYS_openat, AT_FDCWD, file, O_RDONLY | O_CLOEXEC); \
      if (fd >= 0) { log_size("ftruncate", fd, full, 0, 0, (long long)length); syscall(SYS_close, fd); } \
    } \
    return r; \
  }
DEFINE_TRUNCATE(truncate, off_t)
DEFINE_TRUNCATE(truncate64, off64_t)

#define DEFINE_FALLOCATE(name, offtype) \
  EXPORT int name(int fd, int mode, offtype offset, offtype len) { \
    REAL(int (*)(int, int, offtype, offtype), name); \
    PATH_OF(fd); \
    if (should_fail(F_FALLOCATE, path)) { errno = fault_errno; return -1; } \
    int r = real_##name(fd, mode, offset, len); \
    if (r == 0 && recording(path)) log_size("fallocate", fd, path, mode, (long long)offset, (long long)len); \
    return r; \
  }
DEFINE_FALLOCATE(fallocate, off_t)
DEFINE_FALLOCATE(fallocate64, off64_t)

#define DEFINE_POSIX_FALLOCATE(name, offtype) \
  EXPORT int name(int fd, offtype offset, offtype len) { \
    REAL(int (*)(int, offtype, offtype), name); \
    PATH_OF(fd); \
    if (should_fail(F_FALLOCATE, path)) return fault_errno; \
    int r = real_##name(fd, offset, len); \
    if (r == 0 && recording(path)) log_size("fallocate", fd, path, 0, (long long)offset, (long long)len); \
    return r; \
  }
DEFINE_POSIX_FALLOCATE(posix_fallocate, off_t)
DEFINE_POSIX_FALLOCATE(posix_fallocate64, off64_t)

/* ---- rename / unlink / link ---------------------------------------------------------------- */

static int do_rename(int olddir, const char* from, int newdir, const char* to, unsigned flags, int which) {
  char a[PATH_MAX], b[PATH_MAX];
  abs_path(olddir, from, a, sizeof a);
  abs_path(newdir, to, b, sizeof b);
  const char* key = matches(a) ? a : b;
  if (should_fail(F_RENAME, key)) { errno = fault_errno; return -1; }
  int r;
  if (which == 0) {
    REAL(int (*)(const char*, const char*), rename);
    r = real_rename(from, to);
  } else if (which == 1) {
    REAL(int (*)(int, const char*, int, const char*), renameat);
    r = real_renameat(olddir, from, newdir, to);
  } else {
    REAL(int (*)(int, const char*, int, const char*, unsigned), renameat2);
    r = real_renameat2(olddir, from, newdir, to, flags);
  }
  if (r == 0 && recording(key)) {
    char header[2 * PATH_MAX + 64];
    snprintf(header, sizeof header, "rename\tfrom=%s\tto=%s\tflags=%u", a, b, flags);
    record(header, NULL, 0);
  }
  return r;
}
EXPORT int rename(const char* from, const char* to) { return do_rename(AT_FDCWD, from, AT_FDCWD, to, 0, 0); }
EXPORT int renameat(int od, const char* from, int nd, const char* to) { return do_rename(od, from, nd, to, 0, 1); }
EXPORT int renameat2(int od, const char* from, int nd, const char* to, unsigned flags) {
  return do_rename(od, from, nd, to, flags, 2);
}

static int do_unlink(int dirfd, const char* file, int flags, int which) {
  char a[PATH_MAX];
  abs_path(dirfd, file, a, sizeof a);
  if (should_fail(F_UNLINK, a)) { errno = fault_errno; return -1; }
  int r;
  if (which == 0) {
    REAL(int (*)(const char*), unlink);
    r = real_unlink(file);
  } else {
    REAL(int (*)(int, const char*, int), unlinkat);
    r = real_unlinkat(dirfd, file, flags);
  }
  if (r == 0 && recording(a)) {
    char header[PATH_MAX + 64];
    snprintf(header, sizeof header, "unlink\tpath=%s\tflags=%d", a, flags);
    record(header, NULL, 0);
  }
  return r;
}
EXPORT int unlink(const char* file) { return do_unlink(AT_FDCWD, file, 0, 0); }
EXPORT int unlinkat(int dirfd, const char* file, int flags) { return do_unlink(dirfd, file, flags, 1); }

static int do_link(int olddir, const char* from, int newdir, const char* to, int flags, int which) {
  char a[PATH_MAX], b[PATH_MAX];
  abs_path(olddir, from, a, sizeof a);
  abs_path(newdir, to, b, sizeof b);
  const char* key = matches(b) ? b : a;
  if (should_fail(F_LINK, key)) { errno = fault_errno; return -1; }
  int r;
  if (which == 0) {
    REAL(int (*)(const char*, const char*), link);
    r = real_link(from, to);
  } else {
    REAL(int (*)(int, const char*, int, const char*, int), linkat);
    r = real_linkat(olddir, from, newdir, to, flags);
  }
  if (r == 0 && recording(key)) {
    char header[2 * PATH_MAX + 64];
    snprintf(header, sizeof header, "link\tfrom=%s\tto=%s", a, b);
    record(header, NULL, 0);
  }
  return r;
}
EXPORT int link(const char* from, const char* to) { return do_link(AT_FDCWD, from, AT_FDCWD, to, 0, 0); }
EXPORT int linkat(int od, const char* from, int nd, const char* to, int flags) {
  return do_link(od, from, nd, to, flags, 1);
}

/* ---- open / close ----------------------------------------------------------------------------- */

static int needs_mode(int flags) {
#ifdef __O_TMPFILE
  if ((flags & __O_TMPFILE) == __O_TMPFILE) return 1;
#endif
  return (flags & O_CREAT) != 0;
}

static int do_open(int dirfd, const char* file, int flags, mode_t mode, const char* which) {
  char a[PATH_MAX];
  const char* path = NULL;
  if (want_path()) {
    abs_path(dirfd, file, a, sizeof a);
    path = a;
  }
  if (should_fail(F_OPEN, path)) { errno = fault_errno; return -1; }
  int r;
  if (strcmp(which, "open") == 0 || strcmp(which, "open64") == 0 || strcmp(which, "__open_2") == 0 ||
      strcmp(which, "__open64_2") == 0) {
    REAL(int (*)(const char*, int, ...), open);
    r = real_open(file, flags, mode);
  } else {
    REAL(int (*)(int, const char*, int, ...), openat);
    r = real_openat(dirfd, file, flags, mode);
  }
  if (r >= 0 && recording(path) && (flags & (O_CREAT | O_TRUNC | O_WRONLY | O_RDWR))) {
    unsigned long ino, dev;
    int dir;
    fd_ident(r, &ino, &dev, &dir);
    char header[PATH_MAX + 128];
    snprintf(header, sizeof header, "open\tpath=%s\tflags=%d\tino=%lu\tdev=%lu", a, flags, ino, dev);
    record(header, NULL, 0);
  }
  return r;
}

#define MODE_ARG(flags) \
  mode_t mode = 0; \
  if (needs_mode(flags)) { va_list ap; va_start(ap, flags); mode = (mode_t)va_arg(ap, int); va_end(ap); }

EXPORT int open(const char* file, int flags, ...) { MODE_ARG(flags); return do_open(AT_FDCWD, file, flags, mode, "open"); }
EXPORT int open64(const char* file, int flags, ...) { MODE_ARG(flags); return do_open(AT_FDCWD, file, flags, mode, "open64"); }
EXPORT int openat(int dirfd, const char* file, int flags, ...) { MODE_ARG(flags); return do_open(dirfd, file, flags, mode, "openat"); }
EXPORT int openat64(int dirfd, const char* file, int flags, ...) { MODE_ARG(flags); return do_open(dirfd, file, flags, mode, "openat64"); }
EXPORT int __open_2(const char* file, int flags) { return do_open(AT_FDCWD, file, flags, 0, "__open_2"); }
EXPORT int __open64_2(const char* file, int flags) { return do_open(AT_FDCWD, file, flags, 0, "__open64_2"); }
EXPORT int __openat_2(int dirfd, const char* file, int flags) { return do_open(dirfd, file, flags, 0, "__openat_2"); }
EXPORT int __openat64_2(int dirfd, const char* file, int flags) { return do_open(dirfd, file, flags, 0, "__openat64_2"); }
EXPORT int creat(const char* file, mode_t mode) { return do_open(AT_FDCWD, file, O_CREAT | O_WRONLY | O_TRUNC, mode, "open"); }
EXPORT int creat64(const char* file, mode_t mode) { return do_open(AT_FDCWD, file, O_CREAT | O_WRONLY | O_TRUNC, mode, "open"); }

EXPORT int close(int fd) {
  REAL(int (*)(int), close);
  PATH_OF(fd);
  int fail = should_fail(F_CLOSE, path);
  int r = real_close(fd);
  if (fail) { errno = fault_errno; return -1; }
  return r;
}
