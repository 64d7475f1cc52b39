// The HDF5 library's setup: its lock, the file open, and the probe of a file in a child
// process (hdf5/library.hpp).

#include "format/hdf5/library.hpp"
#include "format/hdf5/rollback.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace ooc::hdf5 {


std::mutex& library_lock() {
  static std::mutex lock;
  return lock;
}


std::vector<Holder*>& holders() {
  static std::vector<Holder*> all;
  return all;
}


Id open_file(const std::string& file, bool writable) {
  recover_if_interrupted(file);  // an earlier run stopped while writing into it: put it back first
  auto attempt = [&] { return Id(H5Fopen(file.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, file_access()), H5Fclose); };
  if (Id f = attempt(); f.valid()) return f;
  if (writable && !holders().empty()) {
    for (Holder* h : holders()) h->let_go();
    if (Id f = attempt(); f.valid()) return f;
  }
  if (::access(file.c_str(), R_OK) != 0) throw Error(file, "no such file, or it cannot be read", kind_of_errno(errno));
  if (writable) throw Error(file, "cannot open the HDF5 file for writing");
  throw Error(file, "not an HDF5 file, or it is damaged", ErrorKind::corrupt);
}


Id open_or_create(const std::string& file) {
  if (is_hdf5_file(file)) return open_file(file, true);
  Id f(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, file_access()), H5Fclose);
  if (!f.valid()) throw Error(file, "cannot create the HDF5 file");
  return f;
}

namespace {


// The probe in a child process (set_probe_in_child): whether the library survives
// opening `file` and describing `dataset` (every chunk's place included), or, for an
// empty `dataset`, walking the whole catalogue as list() does. The caller holds the
// library lock, so the child's copy of the library is in a consistent state: no other
// thread is inside it. Each version of a file (device, inode, size, modification time)
// is probed once per dataset; the verdict is kept.
std::atomic<bool> g_probe_in_child{false};

}  // namespace


void probe_in_child(const std::string& file, const std::string& dataset) {
  if (!g_probe_in_child.load(std::memory_order_relaxed)) return;
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;  // the open itself says what is wrong
  using Key = std::tuple<dev_t, ino_t, off_t, std::int64_t, std::int64_t, std::string>;
  static std::map<Key, bool> crashed;  // guarded by the library lock
  const Key key{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, dataset};
  auto damaged = [&] {
    return Error(file, "damaged HDF5 file (the HDF5 library crashed reading it)", ErrorKind::corrupt);
  };
  if (const auto found = crashed.find(key); found != crashed.end()) {
    if (found->second) throw damaged();
    return;
  }
  const pid_t child = ::fork();
  if (child < 0) return;  // no probe: opened in this process, as without one
  if (child == 0) {
    // The library's crash is the answer: no handler of the parent's (Python's
    // faulthandler), no core file, no message (glibc's on a corrupted heap).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    const struct rlimit no_core {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    // The file and dataset are left open: the child writes nothing, not even by closing
    // an object it shares with the parent's open of the same file. Failures are not
    // checked past skipping what did not open: the child's one answer is whether the
    // library crashed, and errors are the parent's to meet and report.
    try {
      const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      if (f >= 0 && dataset.empty()) {
        walk(f, file);
      } else if (f >= 0 && link_exists(f, dataset, file)) {
        const hid_t dset = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
        if (dset >= 0) {
          describe_open(f, dset, file, dataset);
#if H5_VERSION_GE(1, 10, 5)
          hsize_t chunks = 0;  // walks the chunk index, where reading looks chunks up
          H5Dget_num_chunks(dset, H5S_ALL, &chunks);
#endif
        }
      }
    } catch (...) {
    }
    ::_exit(0);
  }
  // Waited for with a timeout: a child stuck (a lock some other thread held at the fork,
  // a file on a hung mount) is killed, and the file opened here, as without a probe.
  // The child's end is awaited on a pidfd (poll wakes the moment it exits); without one
  // (Linux < 5.3), by polling waitpid.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
#ifdef SYS_pidfd_open
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
#else
  const int pidfd = -1;
#endif
  auto pause = std::chrono::microseconds(100);
  int status = 0;
  bool verdict = true;
  while (true) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {  // reaped by someone else: no verdict
      verdict = false;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      verdict = false;
      break;
    }
    if (pidfd >= 0) {
      struct pollfd exited {pidfd, POLLIN, 0};
      ::poll(&exited, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1000)));
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(2 * pause, std::chrono::milliseconds(10));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  if (!verdict) return;
  if (crashed.size() >= 4096) crashed.clear();
  const bool crash = WIFSIGNALED(status);
  crashed.emplace(key, crash);
  if (crash) throw damaged();
}

void set_probe_in_child(bool on) { g_probe_in_child.store(on, std::memory_order_relaxed); }

}  // namespace ooc::hdf5
