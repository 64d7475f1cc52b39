#pragma once
// What the .npy header fuzzer checks for every input, shared with npy_test, which runs
// every file of the seed corpus through it (so a crash once found stays a test).
//
// The parser must either refuse the bytes with npy::FormatError or return a header
// that the writer writes back to the same dtype, shape and layout; any other exception,
// a crash, or a sanitizer report is a bug.

#include "format/npy.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace ooc::fuzz {

inline void check_npy_header(std::span<const std::byte> file) {
  npy::Header header;
  try {
    // As map_file reads a file: the preamble first, then the prefix it announces.
    const std::uint64_t length = npy::prefix_length(file.first(std::min(file.size(), npy::kPreambleBytes)));
    header = npy::parse_header(file.first(static_cast<std::size_t>(std::min<std::uint64_t>(length, file.size()))),
                               file.size());
  } catch (const npy::FormatError&) {
    return;  // refused with a message: fine
  }
  const std::string again = npy::make_header(header.dtype, header.shape, header.order);
  const npy::Header back = npy::parse_header(std::as_bytes(std::span(again)), again.size() + header.data_bytes);
  // The order counts where it lays the bytes out differently (two axes longer than 1, none
  // empty); elsewhere make_header writes C, as np.save does.
  const Shape& s = header.shape;
  const bool order_counts = std::count_if(s.begin(), s.end(), [](std::int64_t n) { return n > 1; }) >= 2 &&
                            std::find(s.begin(), s.end(), 0) == s.end();
  if (back.dtype != header.dtype || back.shape != header.shape || (order_counts && back.order != header.order) ||
      back.data_bytes != header.data_bytes)
    throw std::logic_error("a parsed header written back by make_header parses differently");
}

}  // namespace ooc::fuzz
