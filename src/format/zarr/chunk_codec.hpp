#pragma once
// One Zarr chunk's bytes decoded or encoded through an array's compressor and filters,
// on any thread: the framing numcodecs gives each codec (its LZ4 size prefix) over the
// shared codecs (format/codecs.hpp).

#include "format/layer.hpp"

#include "format/codecs.hpp"
#include "format/zarr.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace ooc::zarr {

/// Buffers a thread reuses from chunk to chunk.
struct ChunkScratch {
  std::vector<std::byte> a, b;
};

/// Decodes `stored` into exactly `chunk_bytes` bytes at `out`. Throws codecs::CodecError.
void decode_chunk(std::span<const std::byte> stored, const Metadata& m, std::size_t chunk_bytes, std::byte* out,
                  ChunkScratch& scratch);

/// Encodes the `chunk_bytes` at `elements` as `compressor` and `filters` say (filters
/// first, as numcodecs); returns the stored bytes (in `scratch`).
std::span<const std::byte> encode_chunk(std::span<const std::byte> elements, const std::optional<Codec>& compressor,
                                        const std::vector<Codec>& filters, std::size_t item, ChunkScratch& scratch);

}  // namespace ooc::zarr
