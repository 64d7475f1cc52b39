#include "format/hdf5/rollback.hpp"

#include "ooc/error.hpp"
#include <hdf5.h>
#include "os/file.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace ooc::hdf5 {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr char kMagic[8] = {'O', 'O', 'C', 'R', 'B', 'K', '0', '1'};
constexpr std::size_t kHeaderBytes = 64;  // magic, size, device, inode, checksum; zero padded
constexpr std::size_t kEntryHead = 24;    // offset, length, checksum; then the bytes

std::uint64_t fnv1a(const void* data, std::size_t size, std::uint64_t hash = 14695981039346656037ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

void put64(unsigned char* at, std::uint64_t v) { std::memcpy(at, &v, 8); }
std::uint64_t get64(const unsigned char* at) {
  std::uint64_t v;
  std::memcpy(&v, at, 8);
  return v;
}

bool write_all(int fd, const void* data, std::size_t size, std::uint64_t offset) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n, size -= static_cast<std::size_t>(n), offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

// Reads up to `size` bytes; returns how many were there, or -1.
ssize_t read_all(int fd, void* data, std::size_t size, std::uint64_t offset) {
  auto* p = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, p + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

struct Header {
  std::uint64_t size = 0, device = 0, inode = 0;
};

std::vector<unsigned char> encode_header(const Header& h) {
  std::vector<unsigned char> bytes(kHeaderBytes, 0);
  std::memcpy(bytes.data(), kMagic, 8);
  put64(&bytes[8], h.size);
  put64(&bytes[16], h.device);
  put64(&bytes[24], h.inode);
  put64(&bytes[32], fnv1a(bytes.data(), 32));
  return bytes;
}

std::optional<Header> decode_header(int fd) {
  unsigned char bytes[kHeaderBytes];
  if (read_all(fd, bytes, kHeaderBytes, 0) != static_cast<ssize_t>(kHeaderBytes)) return std::nullopt;
  if (std::memcmp(bytes, kMagic, 8) != 0 || get64(&bytes[32]) != fnv1a(bytes, 32)) return std::nullopt;
  return Header{get64(&bytes[8]), get64(&bytes[16]), get64(&bytes[24])};
}

// The second way to put a page back when pwrite refuses (a full disk can refuse even a
// rewrite of allocated blocks): through a shared mapping, synced.
bool write_mapped(int fd, const void* data, std::size_t size, std::uint64_t offset) {
  const std::uint64_t base = offset / kPage * kPage, span = offset - base + size;
  void* map = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(base));
  if (map == MAP_FAILED) return false;
  std::memcpy(static_cast<char*>(map) + (offset - base), data, size);
  const bool synced = ::msync(map, span, MS_SYNC) == 0;
  ::munmap(map, span);
  return synced;
}

// Puts back every whole entry of the journal open at `journal_fd` into `file_fd`, then cuts
// the file to `size` and syncs it. An entry that fails its checksum was torn while being
// saved, so the write it guarded never started (each save is synced before its write).
// Returns 0, or the errno of the step that failed.
int restore(int journal_fd, int file_fd, std::uint64_t size) {
  std::vector<unsigned char> bytes;
  for (std::uint64_t at = kHeaderBytes;;) {
    unsigned char head[kEntryHead];
    if (read_all(journal_fd, head, kEntryHead, at) != static_cast<ssize_t>(kEntryHead)) break;
    const std::uint64_t offset = get64(head), length = get64(head + 8), sum = get64(head + 16);
    if (length == 0 || length > kPage) break;
    bytes.resize(length);
    if (read_all(journal_fd, bytes.data(), length, at + kEntryHead) != static_cast<ssize_t>(length)) break;
    if (fnv1a(bytes.data(), length, fnv1a(head, 16)) != sum) break;
    if (!write_all(file_fd, bytes.data(), length, offset)) {
      const int err = errno ? errno : EIO;
      if (!write_mapped(file_fd, bytes.data(), length, offset)) return err;
    }
    at += kEntryHead + length;
  }
  // Cutting off what the run added is tidiness, not correctness: the library reads nothing
  // past the end of allocation that the restored superblock records. A full disk can
  // refuse even this; the restored bytes still make the old file.
  (void)::ftruncate(file_fd, static_cast<off_t>(size));
  if (::fsync(file_fd) != 0) return errno;
  return 0;
}

std::mutex& registry_lock() {
  static std::mutex lock;
  return lock;
}
std::map<std::pair<std::uint64_t, std::uint64_t>, std::weak_ptr<Rollback>>& registry() {
  static std::map<std::pair<std::uint64_t, std::uint64_t>, std::weak_ptr<Rollback>> open;
  return open;
}

void unregister(std::uint64_t device, std::uint64_t inode) {
  std::lock_guard<std::mutex> guard(registry_lock());
  registry().erase({device, inode});
}

// ---- the file driver: sec2's behaviour, with Rollback::protect before each write ----

struct DriverFile {
  H5FD_t pub;  // first: the library sees this
  int fd = -1;
  haddr_t eoa = 0, eof = 0;
  std::uint64_t device = 0, inode = 0;
  std::shared_ptr<Rollback> transaction;
};

constexpr haddr_t kMaxAddr = (haddr_t{1} << 62) - 1;

bool overflows(haddr_t addr, size_t size) {
  return addr == HADDR_UNDEF || addr > kMaxAddr || size > kMaxAddr || addr + size > kMaxAddr;
}

H5FD_t* driver_open(const char* name, unsigned flags, hid_t, haddr_t maxaddr) {
  if (name == nullptr || *name == '\0' || maxaddr == 0 || maxaddr == HADDR_UNDEF) return nullptr;
  int o_flags = (flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY;
  if (flags & H5F_ACC_TRUNC) o_flags |= O_TRUNC;
  if (flags & H5F_ACC_CREAT) o_flags |= O_CREAT;
  if (flags & H5F_ACC_EXCL) o_flags |= O_EXCL;
  const int fd = ::open(name, o_flags | O_CLOEXEC, 0666);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return nullptr;
  }
  auto* file = new DriverFile();
  file->fd = fd;
  file->eof = static_cast<haddr_t>(st.st_size);
  file->device = static_cast<std::uint64_t>(st.st_dev);
  file->inode = static_cast<std::uint64_t>(st.st_ino);
  if (flags & H5F_ACC_RDWR) file->transaction = transaction_for(file->device, file->inode);
  return &file->pub;
}

herr_t driver_close(H5FD_t* f) {
  auto* file = reinterpret_cast<DriverFile*>(f);
  const int result = ::close(file->fd);
  delete file;
  return result == 0 ? 0 : -1;
}

int driver_cmp(const H5FD_t* a, const H5FD_t* b) {
  const auto* x = reinterpret_cast<const DriverFile*>(a);
  const auto* y = reinterpret_cast<const DriverFile*>(b);
  if (x->device != y->device) return x->device < y->device ? -1 : 1;
  if (x->inode != y->inode) return x->inode < y->inode ? -1 : 1;
  return 0;
}

herr_t driver_query(const H5FD_t*, unsigned long* flags) {
  if (flags)
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_POSIX_COMPAT_HANDLE | H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
  return 0;
}

haddr_t driver_get_eoa(const H5FD_t* f, H5FD_mem_t) { return reinterpret_cast<const DriverFile*>(f)->eoa; }
herr_t driver_set_eoa(H5FD_t* f, H5FD_mem_t, haddr_t addr) {
  reinterpret_cast<DriverFile*>(f)->eoa = addr;
  return 0;
}
haddr_t driver_get_eof(const H5FD_t* f, H5FD_mem_t) { return reinterpret_cast<const DriverFile*>(f)->eof; }

herr_t driver_get_handle(H5FD_t* f, hid_t, void** handle) {
  if (handle == nullptr) return -1;
  *handle = &reinterpret_cast<DriverFile*>(f)->fd;
  return 0;
}

herr_t driver_read(H5FD_t* f, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buffer) {
  auto* file = reinterpret_cast<DriverFile*>(f);
  if (overflows(addr, size) || addr + size > file->eoa) return -1;
  const ssize_t got = read_all(file->fd, buffer, size, addr);
  if (got < 0) return -1;
  // Past the end of the file reads as zeros, as in sec2.
  std::memset(static_cast<char*>(buffer) + got, 0, size - static_cast<std::size_t>(got));
  return 0;
}

// The transaction a write must go through: refused (-1) when it has ended.
bool guard(DriverFile* file, std::uint64_t offset, std::uint64_t size) {
  if (!file->transaction) return true;
  if (!file->transaction->active()) return false;
  try {
    file->transaction->protect(offset, size);
    return true;
  } catch (...) {
    return false;
  }
}

herr_t driver_write(H5FD_t* f, H5FD_mem_t, hid_t, haddr_t addr, size_t size, const void* buffer) {
  auto* file = reinterpret_cast<DriverFile*>(f);
  if (overflows(addr, size) || addr + size > file->eoa) return -1;
  if (!guard(file, addr, size)) return -1;
  if (!write_all(file->fd, buffer, size, addr)) return -1;
  file->eof = std::max<haddr_t>(file->eof, addr + size);
  return 0;
}

herr_t driver_truncate(H5FD_t* f, hid_t, hbool_t) {
  auto* file = reinterpret_cast<DriverFile*>(f);
  if (file->eoa == file->eof) return 0;
  if (file->eoa < file->eof && !guard(file, file->eoa, file->eof - file->eoa)) return -1;
  if (file->transaction && !file->transaction->active()) return -1;
  if (::ftruncate(file->fd, static_cast<off_t>(file->eoa)) != 0) return -1;
  file->eof = file->eoa;
  return 0;
}

herr_t driver_lock(H5FD_t* f, hbool_t rw) {
  if (::flock(reinterpret_cast<DriverFile*>(f)->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 || errno == ENOSYS)
    return 0;
  return -1;
}

herr_t driver_unlock(H5FD_t* f) {
  if (::flock(reinterpret_cast<DriverFile*>(f)->fd, LOCK_UN) == 0 || errno == ENOSYS) return 0;
  return -1;
}

H5FD_class_t make_driver_class() {
  H5FD_class_t c{};
  c.name = "ooc_rollback";
  c.maxaddr = kMaxAddr;
  c.fc_degree = H5F_CLOSE_WEAK;
  c.open = driver_open;
  c.close = driver_close;
  c.cmp = driver_cmp;
  c.query = driver_query;
  c.get_eoa = driver_get_eoa;
  c.set_eoa = driver_set_eoa;
  c.get_eof = driver_get_eof;
  c.get_handle = driver_get_handle;
  c.read = driver_read;
  c.write = driver_write;
  c.truncate = driver_truncate;
  c.lock = driver_lock;
  c.unlock = driver_unlock;
  const H5FD_mem_t map[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
  std::copy(std::begin(map), std::end(map), c.fl_map);
  return c;
}

std::string parent_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

static_assert(std::is_same_v<hid_t, std::int64_t>);

std::int64_t file_access() {
  // The caller holds the HDF5 library lock (every HDF5 call of ooc does).
  static const hid_t fapl = [] {
    static const H5FD_class_t driver_class = make_driver_class();
    const hid_t driver = H5FDregister(&driver_class);
    const hid_t list = H5Pcreate(H5P_FILE_ACCESS);
    if (driver < 0 || list < 0 || H5Pset_driver(list, driver, nullptr) < 0)
      throw std::logic_error("cannot register ooc's HDF5 file driver");
    return list;
  }();
  return fapl;
}

std::string rollback_journal_path(const std::string& file) { return file + ".ooc-rollback"; }

Rollback::Rollback(std::string file, std::string journal, int file_fd, int journal_fd, std::uint64_t size,
                   std::uint64_t device, std::uint64_t inode)
    : file_(std::move(file)),
      journal_(std::move(journal)),
      file_fd_(file_fd),
      journal_fd_(journal_fd),
      start_size_(size),
      device_(device),
      inode_(inode),
      journal_end_(kHeaderBytes) {}

std::shared_ptr<Rollback> Rollback::begin(const std::string& file) {
  recover_if_interrupted(file);
  os::UniqueFd target = os::open_existing(file, true);
  struct stat st {};
  if (::fstat(target.get(), &st) != 0) throw Error(file, "cannot stat: " + os::errno_text(errno), kind_of_errno(errno));
  const std::string journal = rollback_journal_path(file);
  // Built under a temporary name, locked and synced, then renamed into place (never over another): whoever finds
  // FILE.ooc-rollback unlocked finds a whole header.
  std::filesystem::path temp;
  os::UniqueFd log = os::create_temp_beside(journal, temp);
  struct Remove {
    std::filesystem::path path;
    ~Remove() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  } remove_temp{temp};
  if (::flock(log.get(), LOCK_EX | LOCK_NB) != 0)
    throw Error(file, "cannot lock its rollback journal: " + os::errno_text(errno), kind_of_errno(errno));
  const std::vector<unsigned char> header = encode_header(
      {static_cast<std::uint64_t>(st.st_size), static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)});
  if (!write_all(log.get(), header.data(), header.size(), 0) || ::fdatasync(log.get()) != 0)
    throw Error(file, "cannot write its rollback journal " + journal + ": " + os::errno_text(errno) +
                          "; nothing was written", kind_of_errno(errno));
  if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, journal.c_str(), RENAME_NOREPLACE) != 0 &&
      (errno != EINVAL || ::link(temp.c_str(), journal.c_str()) != 0)) {
    if (errno == EEXIST)
      throw Error(file, "another ooc run is writing into it (" + journal + " is held); nothing was written");
    throw Error(file, "cannot create its rollback journal " + journal + ": " + os::errno_text(errno) +
                          "; nothing was written", kind_of_errno(errno));
  }
  if (std::filesystem::exists(temp)) ::unlink(temp.c_str());  // linked, where renameat2 is not supported
  remove_temp.path.clear();
  try {
    os::sync_directory(parent_of(file));
  } catch (const Error& e) {
    ::unlink(journal.c_str());
    throw Error(file, "cannot sync its directory before writing (" + e.problem() + "); nothing was written", e.kind());
  }
  auto transaction = std::make_shared<Rollback>(file, journal, -1, -1, static_cast<std::uint64_t>(st.st_size),
                                                static_cast<std::uint64_t>(st.st_dev),
                                                static_cast<std::uint64_t>(st.st_ino));
  // The descriptors move in only now: until here, the guards above own them.
  transaction->file_fd_ = ::dup(target.get());
  transaction->journal_fd_ = ::dup(log.get());
  if (transaction->file_fd_ < 0 || transaction->journal_fd_ < 0) {
    transaction->roll_back();
    throw Error(file, "out of file descriptors; nothing was written");
  }
  std::lock_guard<std::mutex> guard(registry_lock());
  registry()[{transaction->device_, transaction->inode_}] = transaction;
  return transaction;
}

Rollback::~Rollback() {
  try {
    roll_back();
  } catch (...) {
    // The journal stays: the next ooc open of the file rolls back.
  }
  if (file_fd_ >= 0) ::close(file_fd_);
  if (journal_fd_ >= 0) ::close(journal_fd_);
}

bool Rollback::active() const {
  std::lock_guard<std::mutex> guard(lock_);
  return state_ == State::active;
}

void Rollback::protect(std::uint64_t offset, std::uint64_t size) {
  std::lock_guard<std::mutex> guard(lock_);
  if (state_ != State::active) throw Error(file_, "written after its transaction ended");
  const std::uint64_t end = std::min(offset + size, start_size_);
  if (offset >= end) return;
  std::vector<unsigned char> entries;
  std::vector<std::uint64_t> pages;
  for (std::uint64_t page = offset / kPage; page * kPage < end; ++page) {
    if (saved_pages_.count(page)) continue;
    const std::uint64_t at = page * kPage, length = std::min(kPage, start_size_ - at);
    const std::size_t head = entries.size();
    entries.resize(head + kEntryHead + length);
    if (read_all(file_fd_, &entries[head + kEntryHead], length, at) != static_cast<ssize_t>(length))
      throw Error(file_, "cannot read its bytes to save them: " + os::errno_text(errno), kind_of_errno(errno));
    put64(&entries[head], at);
    put64(&entries[head + 8], length);
    put64(&entries[head + 16], fnv1a(&entries[head + kEntryHead], length, fnv1a(&entries[head], 16)));
    pages.push_back(page);
  }
  if (entries.empty()) return;
  if (!write_all(journal_fd_, entries.data(), entries.size(), journal_end_) || ::fdatasync(journal_fd_) != 0)
    throw Error(file_, "cannot save its bytes in " + journal_ + ": " + os::errno_text(errno), kind_of_errno(errno));
  journal_end_ += entries.size();
  saved_pages_.insert(pages.begin(), pages.end());
}

void Rollback::restore_locked() {
  const int err = restore(journal_fd_, file_fd_, start_size_);
  if (err != 0)
    throw Error(file_, "cannot put back its original bytes (" + os::errno_text(err) + "); " + journal_ +
                           " keeps them, and the next oocrun command on the file puts them back", kind_of_errno(err));
  ::unlink(journal_.c_str());
  try {
    os::sync_directory(parent_of(file_));
  } catch (const Error&) {
    // The file is whole again; a journal that reappears after a crash restores the same bytes.
  }
}

void Rollback::roll_back() {
  std::unique_lock<std::mutex> guard(lock_);
  if (state_ != State::active) return;
  state_ = State::rolled_back;  // first: no write of the library gets through from now on
  guard.unlock();
  unregister(device_, inode_);
  guard.lock();
  restore_locked();
}

void Rollback::commit() {
  std::unique_lock<std::mutex> guard(lock_);
  if (state_ != State::active) throw Error(file_, "its transaction has already ended");
  state_ = State::committed;
  guard.unlock();
  unregister(device_, inode_);
  guard.lock();
  auto undo = [&](const std::string& why) {
    state_ = State::rolled_back;
    restore_locked();
    throw Error(file_, why + "; the file was put back as it was, nothing was written");
  };
  if (::fsync(file_fd_) != 0) undo("fsync failed: " + os::errno_text(errno));
  if (::unlink(journal_.c_str()) != 0) undo("cannot remove " + journal_ + ": " + os::errno_text(errno));
  try {
    os::sync_directory(parent_of(file_));
  } catch (const Error& e) {
    // The journal's removal is the commit point, and it may not be durable: undo the write
    // from the journal we still hold open, so that exit 1 means nothing changed.
    undo("cannot sync its directory after the write (" + e.problem() + ")");
  }
}

std::shared_ptr<Rollback> transaction_for(std::uint64_t device, std::uint64_t inode) {
  std::lock_guard<std::mutex> guard(registry_lock());
  const auto found = registry().find({device, inode});
  return found == registry().end() ? nullptr : found->second.lock();
}

void recover_if_interrupted(const std::string& file) {
  const std::string journal = rollback_journal_path(file);
  struct stat st {};
  if (::stat(journal.c_str(), &st) != 0) return;
  const int log = ::open(journal.c_str(), O_RDWR | O_CLOEXEC);
  if (log < 0) {
    if (errno == ENOENT) return;
    throw Error(file, "an interrupted ooc write left " + journal +
                          ", which must be rolled back before the file is used, and it cannot be opened: " +
                          os::errno_text(errno), kind_of_errno(errno));
  }
  os::UniqueFd log_owner(log);
  if (::flock(log, LOCK_EX | LOCK_NB) != 0) return;  // a run is writing into the file now
  struct stat now {};
  if (::fstat(log, &now) != 0 || now.st_nlink == 0) return;  // just committed or rolled back
  const std::optional<Header> header = decode_header(log);
  const int target = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (target < 0)
    throw Error(file, "an interrupted ooc write left " + journal +
                          ", and rolling it back needs the file open for writing: " + os::errno_text(errno), kind_of_errno(errno));
  os::UniqueFd target_owner(target);
  struct stat fs {};
  if (::fstat(target, &fs) != 0) throw Error(file, "cannot stat: " + os::errno_text(errno), kind_of_errno(errno));
  if (!header) {  // never linked without a whole header: a damaged journal
    throw Error(file, journal + " is damaged: the file may hold a half-written dataset; remove it to use the file as is");
  }
  if (header->device != static_cast<std::uint64_t>(fs.st_dev) || header->inode != static_cast<std::uint64_t>(fs.st_ino))
    throw Error(file, journal + " belongs to another file of this name (it was replaced); remove it to use the file");
  if (const int err = restore(log, target, header->size); err != 0)
    throw Error(file, "cannot roll back the interrupted ooc write that " + journal + " records: " + os::errno_text(err), kind_of_errno(err));
  ::unlink(journal.c_str());
  os::sync_directory(parent_of(file));
}

}  // namespace ooc::hdf5
