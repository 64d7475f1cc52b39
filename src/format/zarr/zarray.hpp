#pragma once
// What Zarr's reader, writer and metadata share inside the format: the JSON of a new
// array, and the name of a chunk's file.

#include "format/layer.hpp"

#include "format/zarr.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ooc::zarr {

/// The `.zarray` of a new array, as zarr-python writes one (sorted keys, indent 4).
std::string array_json(DType dtype, const Shape& shape, const std::vector<std::int64_t>& chunks, Order order,
                       const Compression& how);

/// After the array `array` was put in place: every group above it in its store that holds
/// consolidated metadata (`.zmetadata`, as zarr.consolidate_metadata writes) gets the
/// array's new `.zarray` (and the `.zgroup` of groups made on the way) in place of what it
/// said, written beside and renamed over it, synced. Throws ooc::Error naming `shown`.
void update_consolidated(const std::filesystem::path& array, const std::string& shown);

/// The file name of the chunk at grid position `at` (one index per axis, in the array's
/// axis order): "2.0.1" ('.') or "2/0/1" ('/'); "0" for a 0-d array.
inline std::string chunk_key(const std::vector<std::int64_t>& at, char separator) {
  if (at.empty()) return "0";
  std::string key;
  for (std::size_t k = 0; k < at.size(); ++k) {
    if (k) key += separator;
    key += std::to_string(at[k]);
  }
  return key;
}

}  // namespace ooc::zarr
