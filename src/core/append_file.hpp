#pragma once
// An output written front to back (text import's values, text export's lines): under a
// hidden name beside its final name until publish() (fsync, rename, fsync of the
// directory), removed if it is never published.

#include "core/layer.hpp"

#include "core/mapped_array_access.hpp"
#include "ooc/error.hpp"
#include "os/file.hpp"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

namespace ooc::text {

// A file written front to back under a hidden name beside its final name; renamed over
// it by publish(), removed if never published.
class AppendFile {
 public:
  AppendFile(const std::string& final_path, const std::string& shown) : shown_(shown) {
    target_ = detail::output_target(final_path);
    fd_ = os::create_temp_beside(target_, temp_);
  }
  ~AppendFile() {
    if (!temp_.empty()) {
      fd_ = os::UniqueFd();
      std::error_code ec;
      std::filesystem::remove(temp_, ec);
    }
  }
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  int fd() const { return fd_.get(); }
  std::uint64_t end() const { return end_; }
  void skip_to(std::uint64_t offset) { end_ = offset; }

  void append(const void* data, std::size_t size) {
    if (size == 0) return;
    os::write_at(fd_.get(), data, size, end_, shown_);
    // Write-back starts now, so the final fsync finds little left
    // (docs/decisions/2026-11-30-write-back-at-commit.md).
    os::start_writeback(fd_.get(), end_, size);
    end_ += size;
  }

  void truncate(std::uint64_t size) {
    if (::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0)
      throw Error(shown_, "cannot set the output's size: " + os::errno_text(errno), kind_of_errno(errno));
    end_ = size;
  }

  void publish() {
    os::sync_file(fd_.get(), shown_);
    os::publish_file(temp_, target_, shown_);  // undone if the directory's sync fails
    temp_.clear();
  }

 private:
  std::string shown_;
  std::string target_;
  std::filesystem::path temp_;
  os::UniqueFd fd_;
  std::uint64_t end_ = 0;
};

}  // namespace ooc::text
