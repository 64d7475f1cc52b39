#pragma once
// Small pieces of the command line that are worth testing on their own.

#include <cstdint>
#include <string>
#include <string_view>

namespace ooc::cli {

/// "2.15 GB in 1.10 s (1.95 GB/s)": decimal gigabytes, as disk and memory vendors count.
std::string rate_text(std::uint64_t bytes, double seconds);

/// --memory SIZE of sort and unique: parse_size's sizes, at least 1M (UsageError naming
/// --memory otherwise).
std::uint64_t memory_option(const std::string& text);

}  // namespace ooc::cli
