#pragma once
// A scratch directory per test, removed afterwards (under $OOC_TEST_TMP or /tmp).

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace ooc::testing {

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
