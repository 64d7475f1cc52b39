#pragma once
// The .npy format: our own strict header parser and writer (format versions 1.0-3.0).
// Nothing here is ever evaluated or unpickled: the header must be exactly the dict
// numpy writes, {'descr': ..., 'fortran_order': ..., 'shape': (...)}.

#include "format/layer.hpp"

#include "ooc/dtype.hpp"
#include "ooc/shape.hpp"

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace ooc::npy {

/// A header that is not acceptable; the message names the problem, not the file.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Header {
  int major_version = 1;
  int minor_version = 0;
  DType dtype{Kind::floating, 8};
  Shape shape;
  Order order = Order::c;
  std::uint64_t data_offset = 0;  // first byte of the data in the file
  std::uint64_t data_bytes = 0;   // what the header says the data occupies
};

/// Bytes needed to know the header's length (magic, version, length field).
inline constexpr std::size_t kPreambleBytes = 12;
/// Longest header we accept; numpy 1.24 refuses anything over 10000 bytes by default.
inline constexpr std::uint64_t kMaxHeaderBytes = 1 << 20;
/// numpy's NPY_MAXDIMS: np.load refuses an array of more dimensions.
inline constexpr std::size_t kMaxDimensions = 32;

/// Length of the whole prefix (preamble + header dict) that a file starting with
/// `preamble` has; throws FormatError on bad magic or version.
std::uint64_t prefix_length(std::span<const std::byte> preamble);

/// Parses the complete prefix of a file of `file_size` bytes and checks that the
/// data the header promises is there.
Header parse_header(std::span<const std::byte> prefix, std::uint64_t file_size);

/// The prefix numpy 1.24's np.save writes for this array, byte for byte: magic,
/// version 1.0 (2.0 if the dict is too long), the dict, padding to 64 bytes.
std::string make_header(DType dtype, const Shape& shape, Order order);

}  // namespace ooc::npy
