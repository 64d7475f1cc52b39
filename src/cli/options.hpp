#pragma once
// Small pieces of the command line that are worth testing on their own.

#include <cstdint>
#include <string>
#include <string_view>

namespace ooc::cli {

/// Parses a byte count: "4096", "64K", "64M", "1G", "2T" (binary multiples; an optional
/// trailing "B" or "iB" is accepted). Throws ooc::UsageError.
std::uint64_t parse_size(std::string_view text);

/// "2.15 GB in 1.10 s (1.95 GB/s)": decimal gigabytes, as disk and memory vendors count.
std::string rate_text(std::uint64_t bytes, double seconds);

}  // namespace ooc::cli
