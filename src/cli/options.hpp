#pragma once
// Small pieces of the command line that are worth testing on their own.

#include <cstdint>
#include <string>
#include <string_view>

namespace ooc::cli {

/// "2.15 GB in 1.10 s (1.95 GB/s)": decimal gigabytes, as disk and memory vendors count.
std::string rate_text(std::uint64_t bytes, double seconds);

}  // namespace ooc::cli
