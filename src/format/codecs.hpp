#pragma once
// The byte codecs that chunked formats share (HDF5's filters, Zarr's compressors): each
// turns one stored chunk into its bytes, or back, on any thread, at once on several, with
// no library lock. Every decoder is safe on any input: a corrupt or truncated chunk is a
// CodecError saying what is wrong in a few words. How a format frames a codec (HDF5's
// LZ4 header, numcodecs' LZ4 size prefix) stays with that format.

#include "format/layer.hpp"

#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

namespace ooc::codecs {

/// What is wrong with a chunk, in a few words ("corrupt deflate data").
class CodecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Each decoder writes at most `capacity` bytes to `out` and returns how many it wrote;
// data that would decode to more is a CodecError.

/// A zlib stream (RFC 1950: HDF5's deflate filter, numcodecs' Zlib).
std::size_t zlib_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity);
/// A gzip stream (RFC 1952: numcodecs' GZip).
std::size_t gzip_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity);
/// One Blosc (1.x) buffer, which names its own shuffle and codec.
std::size_t blosc_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity);
/// One zstd frame (or several, one after another).
std::size_t zstd_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity);
/// One raw LZ4 block that decodes to exactly `size` bytes.
void lz4_block_decompress(std::span<const std::byte> in, std::byte* out, std::size_t size);

// Each encoder writes the encoded bytes to `out`, which holds `capacity` bytes, at least
// compress_bound(in.size()), and returns how many it wrote.
/// At least as many bytes as any encoder below writes for `size` bytes.
std::size_t compress_bound(std::size_t size);
std::size_t zlib_compress(std::span<const std::byte> in, int level, std::byte* out, std::size_t capacity);
std::size_t gzip_compress(std::span<const std::byte> in, int level, std::byte* out, std::size_t capacity);
/// `shuffle`: 0 none, 1 bytes, 2 bits; `codec`: blosclz, lz4, lz4hc, zlib, zstd.
std::size_t blosc_compress(std::span<const std::byte> in, std::size_t item, int level, int shuffle, const char* codec,
                           std::byte* out, std::size_t capacity);
std::size_t zstd_compress(std::span<const std::byte> in, int level, std::byte* out, std::size_t capacity);
/// A raw LZ4 block.
std::size_t lz4_block_compress(std::span<const std::byte> in, int acceleration, std::byte* out, std::size_t capacity);

/// Blosc's number for a codec name ("lz4", "zstd", ...), or -1.
int blosc_codec_number(const char* name);

/// The byte shuffle of `size` bytes of `item`-byte elements (HDF5's shuffle filter,
/// numcodecs' Shuffle): byte j of element i goes to j * n + i; bytes past the last whole
/// element stay where they are. unshuffle undoes it.
void shuffle(const std::byte* in, std::byte* out, std::size_t size, std::size_t item);
void unshuffle(const std::byte* in, std::byte* out, std::size_t size, std::size_t item);

}  // namespace ooc::codecs
