#pragma once
// An output written under a temporary name and given its final one only once complete.

#include "core/layer.hpp"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace ooc::hdf5 {
class Rollback;
}

namespace ooc::detail {

/// One owner for an output not yet committed: its temporary name, how to publish it
/// under its final name once the data is durable, and how to remove every trace of it
/// if that never happens. Move-only; destroyed unpublished, it discards the output (a
/// run that failed or was interrupted leaves no partial file under the final name).
class PendingOutput {
 public:
  /// Nothing pending: an array opened in place, or an output already published.
  PendingOutput() = default;
  /// A new file at `temp` (from os::create_temp_beside), renamed over `final_path`
  /// (and the directory synced) on publish, removed on discard. If the directory's sync
  /// fails, the rename is undone (os::publish_file): the output stays pending, and
  /// whatever file had the final name keeps it.
  static PendingOutput new_file(std::filesystem::path temp, std::string final_path);
  /// A new directory at `temp` (a Zarr array, zarr::create_temp_directory) put in place as
  /// `final_path` on publish (zarr::publish_directory: renamed, or exchanged with the array
  /// it replaces, and the parent synced), removed with its contents on discard.
  static PendingOutput new_directory(std::filesystem::path temp, std::filesystem::path final_path, std::string shown);
  /// A dataset written under the hidden name `temp` inside the existing HDF5 `file`,
  /// whose every write goes through `transaction` (begun before the first): on publish
  /// moved to `final_name` (replacing a dataset of that name when `overwrite`) and the
  /// transaction committed; on discard the file is rolled back to its bytes before the run.
  static PendingOutput hidden_dataset(std::string file, std::string temp, std::string final_name, bool overwrite,
                                      std::shared_ptr<hdf5::Rollback> transaction);

  PendingOutput(PendingOutput&& other) noexcept;
  PendingOutput& operator=(PendingOutput&& other) noexcept;
  PendingOutput(const PendingOutput&) = delete;
  PendingOutput& operator=(const PendingOutput&) = delete;
  ~PendingOutput() { discard(); }

  /// True until publish() or discard().
  explicit operator bool() const { return static_cast<bool>(publish_); }
  /// The temporary file of a new_file output (what another process maps to write its
  /// part of it); empty for a hidden dataset or when nothing is pending.
  const std::filesystem::path& temp_file() const { return temp_file_; }

  /// Gives the output its final name; the caller made its data durable first. Throws
  /// ooc::Error if that fails, and the output stays pending.
  void publish();
  /// Removes the output, if still pending. Errors are swallowed: this runs in
  /// destructors, and what is left at worst is a hidden temporary.
  void discard() noexcept;

 private:
  PendingOutput(std::filesystem::path temp_file, std::function<void()> publish, std::function<void()> discard);

  std::filesystem::path temp_file_;
  std::function<void()> publish_;
  std::function<void()> discard_;
};

}  // namespace ooc::detail
