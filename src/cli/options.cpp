#include "cli/options.hpp"

#include <cctype>
#include <cstdio>
#include "ooc/error.hpp"

#include <stdexcept>

namespace ooc::cli {

std::uint64_t parse_size(std::string_view text) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (~std::uint64_t{0} - digit) / 10) throw UsageError("size '" + std::string(text) + "' is too large");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) throw UsageError("'" + std::string(text) + "' is not a size (try 64M or 1G)");
  std::string_view unit = text.substr(i);
  // A multiplier letter may be followed by "B" or "iB" ("64M", "64MB", "64MiB").
  if (unit.size() > 1 && unit.ends_with("iB")) unit.remove_suffix(2);
  else if (unit.size() > 1 && unit.ends_with("B")) unit.remove_suffix(1);
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "k") shift = 10;
  else if (unit == "M" || unit == "m") shift = 20;
  else if (unit == "G" || unit == "g") shift = 30;
  else if (unit == "T" || unit == "t") shift = 40;
  else throw UsageError("'" + std::string(text) + "' is not a size (try 64M or 1G)");
  if (shift > 0 && value > (~std::uint64_t{0} >> shift)) throw UsageError("size '" + std::string(text) + "' is too large");
  return value << shift;
}

std::string rate_text(std::uint64_t bytes, double seconds) {
  char buf[96];
  const double gb = static_cast<double>(bytes) / 1e9;
  std::snprintf(buf, sizeof buf, "%.2f GB in %.2f s (%.2f GB/s)", gb, seconds,
                seconds > 0 ? gb / seconds : 0.0);
  return buf;
}

}  // namespace ooc::cli
