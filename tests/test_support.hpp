#pragma once
// A scratch directory per test, removed afterwards (under $OOC_TEST_TMP or /tmp).

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

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

}  // namespace ooc::testing
