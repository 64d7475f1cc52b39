#pragma once
// Writing into an HDF5 file that already holds a user's objects, without ever risking them:
// a rollback journal (SQLite's model) beside the file, and the file driver every HDF5 open
// of ooc goes through, which saves the original bytes of any range below the file's size
// at the start into that journal, durably, before the library overwrites them.

#include "format/layer.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

namespace ooc::hdf5 {

/// The file access property list that every H5Fopen/H5Fcreate of ooc uses: a POSIX driver
/// like the library's sec2 (files it makes are plain HDF5 files) that calls
/// Rollback::protect before each write into a file with a transaction open, and refuses
/// writes into one whose transaction ended (a file the library failed to close would
/// otherwise be flushed later, over the restored bytes).
/// (An hid_t; the HDF5 headers stay inside src/format/hdf5*.cpp.)
std::int64_t file_access();

/// One transaction on an existing HDF5 file. begin() creates FILE.ooc-rollback (header
/// durable, directory synced) before anything is written; every byte the HDF5 library then
/// overwrites below the file's starting size has its page saved there and fdatasynced
/// first. commit() fsyncs the file, then removes the journal (the commit point) and syncs
/// the directory; roll_back() puts the saved pages back, cuts the file to its starting
/// size, syncs and removes the journal. A crash at any point leaves the journal, which the
/// next ooc open of the file (recover_if_interrupted) rolls back: the file is then exactly
/// the old one, or, once the journal's removal is durable, the new one.
class Rollback {
 public:
  static std::shared_ptr<Rollback> begin(const std::string& file);
  ~Rollback();
  Rollback(const Rollback&) = delete;
  Rollback& operator=(const Rollback&) = delete;

  /// Saves the original bytes of [offset, offset + size) that lie below the file's starting
  /// size and are not saved yet; durable when it returns. Throws ooc::Error.
  void protect(std::uint64_t offset, std::uint64_t size);
  /// The HDF5 library has closed the file: makes everything durable and ends the
  /// transaction. If that fails the file is rolled back and ooc::Error says so.
  void commit();
  /// Puts the file back as it was. Throws ooc::Error if that fails (the journal stays, and
  /// the next ooc open of the file rolls back again).
  void roll_back();
  bool active() const;
  const std::string& file() const { return file_; }
  std::uint64_t starting_size() const { return start_size_; }

  Rollback(std::string file, std::string journal, int file_fd, int journal_fd, std::uint64_t size,
           std::uint64_t device, std::uint64_t inode);

 private:
  void restore_locked();

  std::string file_, journal_;
  int file_fd_ = -1, journal_fd_ = -1;
  std::uint64_t start_size_ = 0, device_ = 0, inode_ = 0;
  std::uint64_t journal_end_ = 0;
  std::unordered_set<std::uint64_t> saved_pages_;
  enum class State { active, committed, rolled_back } state_ = State::active;
  mutable std::mutex lock_;
};

/// The open transaction on the file with this identity, if any.
std::shared_ptr<Rollback> transaction_for(std::uint64_t device, std::uint64_t inode);

/// If an earlier ooc run was stopped while writing into `file` (its FILE.ooc-rollback is
/// there and no process holds it), puts the file back as it was before that run. Throws
/// ooc::Error when that is needed and cannot be done.
void recover_if_interrupted(const std::string& file);

/// FILE.ooc-rollback.
std::string rollback_journal_path(const std::string& file);

}  // namespace ooc::hdf5
