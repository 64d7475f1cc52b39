#pragma once
// A scratch directory per test, removed afterwards (under $OOC_TEST_TMP or /tmp).

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace ooc::testing {

// True in the AddressSanitizer tree (clang -O0), where the widest sweeps take a sample of
// their cases: the plain tree runs all of them.
#if defined(__SANITIZE_ADDRESS__)
#define OOC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OOC_TEST_ASAN 1
#endif
#endif
#ifdef OOC_TEST_ASAN
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

class ScratchDir {
 public:
  ScratchDir() {
    const char* root = std::getenv("OOC_TEST_TMP");
    std::filesystem::path base = root ? root : std::filesystem::temp_directory_path();
    std::random_device seed;
    path_ = base / ("ooc-unit-" + std::to_string(seed()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  std::size_t entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(path_)) ++n;
    return n;
  }

 private:
  std::filesystem::path path_;
};
// The fraction of bytes [offset, offset + size) of a file that is in the page cache.
inline double resident_fraction(const std::string& path, std::size_t offset = 0, std::size_t size = 0) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  const auto file_size = static_cast<std::size_t>(::lseek(fd, 0, SEEK_END));
  if (size == 0) size = file_size - offset;
  const std::size_t page = 4096, first = offset / page * page;
  const std::size_t length = offset + size - first;
  void* map = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(first));
  ::close(fd);
  if (map == MAP_FAILED) return -1;
  std::vector<unsigned char> resident((length + page - 1) / page);
  const bool ok = ::mincore(map, length, resident.data()) == 0;
  ::munmap(map, length);
  if (!ok) return -1;
  std::size_t in = 0;
  for (unsigned char r : resident) in += r & 1;
  return static_cast<double>(in) / static_cast<double>(resident.size());
}

// Writes a file's pages back and drops them from the page cache (clean pages go at once).
// False where the file system keeps them anyway (tmpfs): a test of cold reads skips then.
inline bool evict_from_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  const bool ok = ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok && resident_fraction(path) < 0.5;
}

}  // namespace ooc::testing
