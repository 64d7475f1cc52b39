#pragma once
// File descriptors and the POSIX calls on them: the only place in ooc that opens,
// syncs or renames files. Every failure becomes an ooc::Error naming the file.

#include "os/layer.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

namespace ooc::os {

/// One owner for a file descriptor; closes it in its destructor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// The errno text of err, lower-case as the rest of our messages ("no such file or directory").
std::string errno_text(int err);

/// Opens an existing regular file for reading, or reading and writing.
UniqueFd open_existing(const std::string& path, bool writable);
std::uint64_t file_size(int fd, const std::string& path);
/// Reads up to `size` bytes at `offset`; returns how many were there.
std::size_t read_at(int fd, void* buffer, std::size_t size, std::uint64_t offset, const std::string& path);
void write_at(int fd, const void* buffer, std::size_t size, std::uint64_t offset, const std::string& path);

/// Creates an empty file next to `final_path` under a fresh hidden name, so that a
/// rename can later put it in place atomically. `temp_path` receives the name.
UniqueFd create_temp_beside(const std::filesystem::path& final_path, std::filesystem::path& temp_path);

/// Reserves `size` bytes on disk for the file, so a full disk is reported here and not
/// as a SIGBUS while writing through a mapping. `path` is the name users know.
void preallocate(int fd, std::uint64_t size, const std::string& path);
/// The same for the `size` bytes at `offset` (a dataset inside an existing file).
void preallocate_range(int fd, std::uint64_t offset, std::uint64_t size, const std::string& path);

void sync_file(int fd, const std::string& path);
/// Makes a rename in `directory` durable. Errors name the directory.
void sync_directory(const std::filesystem::path& directory);
/// Makes the entries of the directory that holds `file` durable. Errors name `shown`
/// (the name the user knows), never the directory alone: "SHOWN: cannot sync its
/// directory (DIR: fsync failed: WHY)".
void sync_directory_of(const std::filesystem::path& file, const std::string& shown);
/// The same, not throwing: why it failed ("fsync failed: input/output error", "cannot
/// open it: ..."), or empty.
std::string try_sync_directory_of(const std::filesystem::path& file);
void rename_file(const std::filesystem::path& from, const std::filesystem::path& to);
/// Puts the finished file `temp` (data already synced) in place under `final_path`: a
/// file already there is first linked to a hidden name beside it, then `temp` is renamed
/// over it and the directory synced. If that sync fails, the rename is undone (the old
/// file put back, or the new name removed) and an Error naming `shown` says that nothing
/// was written; so a failure changes nothing. On success the hidden link is removed.
void publish_file(const std::filesystem::path& temp, const std::filesystem::path& final_path, const std::string& shown);

/// Starts writing the dirty pages of [offset, offset + size) to disk without waiting
/// (sync_file_range SYNC_FILE_RANGE_WRITE), so a later fsync finds less left to do. A
/// hint: errors are left for that fsync to report.
void start_writeback(int fd, std::uint64_t offset, std::uint64_t size);
/// fdatasync: the file's data (and the size) are on disk when it returns.
void sync_data(int fd, const std::string& path);
/// Removes a file; a file that is already gone is not an error.
void remove_file(const std::filesystem::path& path);

/// Takes an advisory lock (an OFD record lock on the whole file) without waiting: shared
/// (many holders) or exclusive (one; the descriptor must be open for writing). False if
/// another open file holds a conflicting lock. The lock goes with the open file: closing
/// it, or the process dying, releases it.
bool try_lock(int fd, bool exclusive, const std::string& path);

/// Which file a descriptor is open on, as the kernel tells files apart.
struct FileId {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  bool operator==(const FileId&) const = default;
};
FileId file_id(int fd, const std::string& path);

/// "4.19 MB (4194432 bytes)": a size a person reads, with the exact count.
std::string size_text(std::uint64_t bytes);

}  // namespace ooc::os
