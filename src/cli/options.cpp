#include "cli/options.hpp"

#include "ooc/error.hpp"
#include "ooc/pipeline.hpp"

#include <cstdio>

namespace ooc::cli {

std::string rate_text(std::uint64_t bytes, double seconds) {
  char buf[96];
  const double gb = static_cast<double>(bytes) / 1e9;
  std::snprintf(buf, sizeof buf, "%.2f GB in %.2f s (%.2f GB/s)", gb, seconds,
                seconds > 0 ? gb / seconds : 0.0);
  return buf;
}

std::uint64_t memory_option(const std::string& text) {
  std::uint64_t bytes = 0;
  try {
    bytes = parse_size(text);
  } catch (const Error& e) {
    throw UsageError("--memory: " + e.problem(), "--memory");
  }
  if (bytes < (std::uint64_t{1} << 20)) throw UsageError("--memory must be at least 1M", "--memory");
  return bytes;
}

}  // namespace ooc::cli
