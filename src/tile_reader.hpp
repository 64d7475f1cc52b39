#pragma once
// How the pipeline gets the bytes of an array that cannot be mapped (a chunked or
// compressed HDF5 dataset): a reader copies any run of elements into a buffer.

#include <cstdint>

namespace ooc::detail {

class TileReader {
 public:
  virtual ~TileReader() = default;
  /// Copies elements [begin, end), in memory order and the array's own byte order, to dst.
  virtual void read(std::int64_t begin, std::int64_t end, void* dst) = 0;
};

}  // namespace ooc::detail
