#include "os/file.hpp"

#include "ooc/error.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace ooc::os {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

std::string errno_text(int err) {
  std::string text = std::strerror(err);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

UniqueFd open_existing(const std::string& path, bool writable) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(path, errno_text(errno), kind_of_errno(errno));
  UniqueFd owner(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(path, errno_text(errno), kind_of_errno(errno));
  if (S_ISDIR(st.st_mode)) throw Error(path, "is a directory");
  if (!S_ISREG(st.st_mode)) throw Error(path, "not a regular file");
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return owner;
}

std::uint64_t file_size(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(path, errno_text(errno), kind_of_errno(errno));
  return static_cast<std::uint64_t>(st.st_size);
}

std::size_t read_at(int fd, void* buffer, std::size_t size, std::uint64_t offset, const std::string& path) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, static_cast<char*>(buffer) + done, size - done,
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(path, "read failed: " + errno_text(errno), kind_of_errno(errno));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

void write_at(int fd, const void* buffer, std::size_t size, std::uint64_t offset, const std::string& path) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, static_cast<const char*>(buffer) + done, size - done,
                               static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(path, "write failed: " + errno_text(errno), kind_of_errno(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

namespace {

// Temporaries of `final_path` left by runs that died (kill -9, a power cut): a hidden name
// of ours, ".NAME.ooc-" and 16 hex digits, whose lock no open file holds any more. Removed
// when the next run makes an output of the same name, so a rerun leaves nothing behind.
void remove_stale_temporaries(const std::filesystem::path& final_path, const std::filesystem::path& ours) {
  const std::filesystem::path dir = final_path.has_parent_path() ? final_path.parent_path() : ".";
  const std::string prefix = "." + final_path.filename().string() + ".ooc-";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != prefix.size() + 16 || name.compare(0, prefix.size(), prefix) != 0 || it->path() == ours) continue;
    if (name.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos) continue;
    const int fd = ::open(it->path().c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    UniqueFd owner(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    try {
      if (try_lock(fd, true, it->path().string())) ::unlink(it->path().c_str());
    } catch (const Error&) {
      // A file system without locks: nothing tells a live run's temporary from a dead one's.
    }
  }
}

}  // namespace

UniqueFd create_temp_beside(const std::filesystem::path& final_path, std::filesystem::path& temp_path) {
  const std::filesystem::path dir = final_path.has_parent_path() ? final_path.parent_path() : ".";
  std::random_device seed;
  std::mt19937_64 rng(seed());
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rng()));
    temp_path = dir / ("." + final_path.filename().string() + ".ooc-" + suffix);
    // 0666 and the umask: the permissions np.save's open() would give.
    const int fd = ::open(temp_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      UniqueFd owner(fd);
      // Held while the output is written: what marks a temporary as some run's, alive.
      bool locked = false, lockable = true;
      try {
        locked = try_lock(fd, true, final_path.string());
      } catch (const Error&) {
        // No locks on this file system: temporaries of dead runs stay (they are hidden).
        lockable = false;
      }
      if (lockable) {
        // Between the create and the lock, another run making the same output may have
        // taken the new file for a dead run's (it holds the lock, or has unlinked the
        // name): that name is lost, another is drawn.
        struct stat ours {}, named {};
        if (!locked || ::fstat(fd, &ours) != 0 || ::stat(temp_path.c_str(), &named) != 0 ||
            ours.st_ino != named.st_ino || ours.st_dev != named.st_dev)
          continue;
        remove_stale_temporaries(final_path, temp_path);
      }
      return owner;
    }
    if (errno != EEXIST) {
      const int err = errno;
      throw Error(final_path.string(), "cannot create output: " + errno_text(err), kind_of_errno(err));
    }
  }
  throw Error(final_path.string(), "cannot create output: no free temporary name");
}

void preallocate(int fd, std::uint64_t size, const std::string& path) { preallocate_range(fd, 0, size, path); }

void preallocate_range(int fd, std::uint64_t offset, std::uint64_t size, const std::string& path) {
  if (size == 0) return;
  auto no_space = [&](const std::string& free_text) {
    return Error(path, "not enough disk space: needs " + size_text(size) + free_text, ErrorKind::no_space);
  };
  // Refused before posix_fallocate when the free space cannot hold it: a failing
  // posix_fallocate first fills the disk (ext4 keeps the blocks until the file is
  // unlinked, so other programs meet a full disk) and the free figure then reads 0.
  // The file's blocks (st_blocks) bound what the range already holds from above, so the
  // bytes still to allocate are at least size - st_blocks * 512: exact for a new file,
  // and never a refusal of what would fit when some of the range is already allocated.
  struct statvfs fs {};
  struct stat st {};
  if (::fstatvfs(fd, &fs) == 0 && ::fstat(fd, &st) == 0) {
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
    const std::uint64_t held = static_cast<std::uint64_t>(st.st_blocks) * 512;
    const std::uint64_t missing = size > held ? size - held : 0;
    if (missing > free_bytes) throw no_space(", " + size_text(free_bytes) + " free");
  }
  const int err = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(size));
  if (err == 0) return;
  if (err == ENOSPC || err == EFBIG) {
    // Another writer took the space meanwhile (or the blocks' metadata did not fit).
    std::string free_text;
    if (::fstatvfs(fd, &fs) == 0)
      free_text = ", " + size_text(static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize) + " free";
    throw no_space(free_text);
  }
  throw Error(path, "cannot reserve " + size_text(size) + ": " + errno_text(err), kind_of_errno(err));
}

void sync_file(int fd, const std::string& path) {
  if (::fsync(fd) != 0) throw Error(path, "fsync failed: " + errno_text(errno), kind_of_errno(errno));
}

void sync_directory(const std::filesystem::path& directory) {
  const std::filesystem::path dir = directory.empty() ? "." : directory;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(dir.string(), "cannot open directory: " + errno_text(errno), kind_of_errno(errno));
  UniqueFd owner(fd);
  if (::fsync(fd) != 0 && errno != EINVAL) throw Error(dir.string(), "fsync failed: " + errno_text(errno), kind_of_errno(errno));
}

namespace {

std::filesystem::path directory_of(const std::filesystem::path& file) {
  return file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
}

}  // namespace

std::string try_sync_directory_of(const std::filesystem::path& file) {
  const std::filesystem::path dir = directory_of(file);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return "cannot open it: " + errno_text(errno);
  UniqueFd owner(fd);
  if (::fsync(fd) != 0 && errno != EINVAL) return "fsync failed: " + errno_text(errno);
  return {};
}

namespace {

bool same_file(const std::filesystem::path& path, const struct stat& as) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && st.st_dev == as.st_dev && st.st_ino == as.st_ino;
}

}  // namespace

void sync_directory_of(const std::filesystem::path& file, const std::string& shown) {
  const std::string why = try_sync_directory_of(file);
  if (!why.empty()) throw Error(shown, "cannot sync its directory (" + why + ")");
}

void publish_file(const std::filesystem::path& temp, const std::filesystem::path& final_path, const std::string& shown) {
  struct stat ours {};
  if (::stat(temp.c_str(), &ours) != 0)
    throw Error(shown, "cannot move the finished output into place: " + temp.string() + ": " + errno_text(errno), kind_of_errno(errno));
  // The file the output replaces, linked to a hidden name (the temporaries' pattern) until
  // the new entry is durable, so that a failed sync can put it back.
  struct stat old {};
  const bool replaces = ::lstat(final_path.c_str(), &old) == 0;
  std::filesystem::path backup;
  if (replaces) {
    std::random_device seed;
    std::mt19937_64 rng(seed());
    for (int attempt = 0; attempt < 100; ++attempt) {
      char suffix[17];
      std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rng()));
      const std::filesystem::path name =
          directory_of(final_path) / ("." + final_path.filename().string() + ".ooc-" + suffix);
      if (::link(final_path.c_str(), name.c_str()) == 0) {
        backup = name;
        break;
      }
      if (errno != EEXIST) break;  // gone meanwhile, or no hard links on this file system
    }
  }
  auto drop_backup = [&] {
    if (!backup.empty()) ::unlink(backup.c_str());
  };
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    drop_backup();
    throw Error(shown, "cannot move the finished output into place: " + errno_text(err), kind_of_errno(err));
  }
  const std::string why = try_sync_directory_of(final_path);
  if (why.empty()) {
    if (!backup.empty()) {
      drop_backup();
      try_sync_directory_of(final_path);  // the hidden name's removal; the output is durable already
    }
    return;
  }
  // Undone, so that the failure changes nothing: the old file back under its name, or
  // the new name removed. Only while the name still holds our file.
  const std::string kept = "; the new output is in place but may not survive a power cut: run the same command again";
  std::string state;
  if (!same_file(final_path, ours)) {
    drop_backup();
    state = "; another process replaced it meanwhile";
  } else if (!backup.empty()) {
    if (::rename(backup.c_str(), final_path.c_str()) == 0) {
      state = "; nothing was written (the file it replaced is back)";
    } else {
      drop_backup();
      state = kept;
    }
  } else if (replaces) {
    state = kept;  // no hard link could keep the old file: the new one stays
  } else {
    state = ::unlink(final_path.c_str()) == 0 ? "; nothing was written" : kept;
  }
  try_sync_directory_of(final_path);  // best effort: the undo's entries
  throw Error(shown, "cannot sync its directory (" + why + ")" + state);
}

void rename_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error(to.string(), "cannot move the finished output into place: " + errno_text(errno), kind_of_errno(errno));
}

void start_writeback(int fd, std::uint64_t offset, std::uint64_t size) {
  if (size > 0) ::sync_file_range(fd, static_cast<off64_t>(offset), static_cast<off64_t>(size), SYNC_FILE_RANGE_WRITE);
}

void sync_data(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0) throw Error(path, "fdatasync failed: " + errno_text(errno), kind_of_errno(errno));
}

void remove_file(const std::filesystem::path& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw Error(path.string(), "cannot remove: " + errno_text(errno), kind_of_errno(errno));
}

bool try_lock(int fd, bool exclusive, const std::string& path) {
  // An open-file-description lock over the whole file: like flock() it belongs to the
  // open file, not the process, but it is independent of flock(), which the HDF5 library
  // takes on the same files (a shared lock of ours must not stop HDF5 from opening the
  // file we read from to write a dataset into it).
  struct flock whole {};
  whole.l_type = exclusive ? F_WRLCK : F_RDLCK;
  whole.l_whence = SEEK_SET;
  while (::fcntl(fd, F_OFD_SETLK, &whole) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES) return false;
    throw Error(path, "cannot lock: " + errno_text(errno), kind_of_errno(errno));
  }
  return true;
}

FileId file_id(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(path, errno_text(errno), kind_of_errno(errno));
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

std::string size_text(std::uint64_t bytes) {
  char buf[64];
  const double value = static_cast<double>(bytes);
  if (bytes < 1000) return std::to_string(bytes) + " bytes";
  const char* unit = value < 1e6 ? "kB" : value < 1e9 ? "MB" : value < 1e12 ? "GB" : "TB";
  const double scale = value < 1e6 ? 1e3 : value < 1e9 ? 1e6 : value < 1e12 ? 1e9 : 1e12;
  std::snprintf(buf, sizeof buf, "%.2f %s (%llu bytes)", value / scale, unit, static_cast<unsigned long long>(bytes));
  return buf;
}

}  // namespace ooc::os
