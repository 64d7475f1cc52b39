#include "cli/options.hpp"

#include <cstdio>

namespace ooc::cli {

std::string rate_text(std::uint64_t bytes, double seconds) {
  char buf[96];
  const double gb = static_cast<double>(bytes) / 1e9;
  std::snprintf(buf, sizeof buf, "%.2f GB in %.2f s (%.2f GB/s)", gb, seconds,
                seconds > 0 ? gb / seconds : 0.0);
  return buf;
}

}  // namespace ooc::cli
