#pragma once
// The HDF5 filters ooc decodes itself, without the HDF5 library: a chunk read raw
// (H5Dread_chunk) in the serial stage is decoded here, on any thread, at once on several.
// Filter numbers are HDF5's and the plugins' that h5py and hdf5plugin write: deflate (1),
// shuffle (2), fletcher32 (3), lzf (32000), blosc (32001), lz4 (32004), bitshuffle (32008,
// alone or with its lz4 or zstd; decoded only: no Debian plugin writes it). Nothing here
// calls HDF5; every function is safe on any input (a corrupt chunk is a FilterError). The
// codecs themselves are format/codecs.hpp's, which Zarr's chunks share.

#include "format/layer.hpp"

#include "format/codecs.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

namespace ooc::hdf5::filters {

constexpr unsigned kDeflate = 1, kShuffle = 2, kFletcher32 = 3, kLzf = 32000, kBlosc = 32001, kLz4 = 32004,
                   kBitshuffle = 32008;

/// One filter of a dataset's pipeline, with its client data (cd_values).
struct Filter {
  unsigned id = 0;
  std::vector<unsigned> values;
};

/// What is wrong with a chunk, in a few words ("corrupt deflate data", "checksum mismatch"):
/// the shared codecs' error (format/codecs.hpp), which they throw too.
using FilterError = codecs::CodecError;

/// True if ooc decodes filter `id` itself.
bool decodable(unsigned id);
/// "deflate", "shuffle", "fletcher32", "lzf", "blosc", "lz4", "bitshuffle", or "" for another filter.
const char* name_of(unsigned id);

/// Buffers one thread reuses from chunk to chunk: memory stays at about two chunks per
/// thread however many chunks it decodes.
struct Scratch {
  std::vector<std::byte> a, b;
};

/// Decodes one stored chunk: the filters of `pipeline` (in the order they were applied
/// when writing) undone last to first, into exactly `chunk_bytes` bytes of elements of
/// `item` bytes. The result goes to `direct` when it is not null (it must hold
/// `chunk_bytes`), else into `scratch`; returns where it is. Filter i is skipped when bit
/// i of `mask` is set (HDF5's filter mask of a chunk stored without it: an optional
/// filter, as lzf, that did not shrink the chunk). Throws FilterError.
const std::byte* decode(std::span<const std::byte> stored, const std::vector<Filter>& pipeline, std::size_t item,
                        std::size_t chunk_bytes, Scratch& scratch, std::byte* direct = nullptr, std::uint32_t mask = 0);

/// Encodes one chunk of `elements` (of `item` bytes each, the chunk's full size) through
/// `pipeline` (filters in the order they apply: shuffle, then deflate, lz4 or blosc) into
/// `out`, as HDF5 and the plugins write it: what decode() undoes and h5py reads. Deflate's
/// level is values[0]; blosc's values are the filter's own (4: level, 5: shuffle, 6:
/// codec number). Throws FilterError for a filter it does not encode.
void encode(std::span<const std::byte> elements, const std::vector<Filter>& pipeline, std::size_t item,
            Scratch& scratch, std::vector<std::byte>& out);

/// Blosc's number for a codec name ("lz4", "zstd", ...), or -1.
int blosc_codec_number(const char* name);

// The pieces, for tests.
/// HDF5's Fletcher-32 (H5_checksum_fletcher32).
std::uint32_t fletcher32(const std::byte* data, std::size_t size);
/// Undoes HDF5's byte shuffle of `size` bytes of `item`-byte elements.
void unshuffle(const std::byte* in, std::byte* out, std::size_t size, std::size_t item);
/// Undoes bitshuffle's bit transpose of `elements` elements of `item` bytes, in blocks of
/// `block` elements (a multiple of 8; 0: bitshuffle's default for the item size); the
/// last elements % 8 are copied as they are.
void bitunshuffle(const std::byte* in, std::byte* out, std::size_t elements, std::size_t item, std::size_t block);
/// Bitshuffle's default block: 8 KiB of elements, a multiple of 8, at least 128.
std::size_t bitshuffle_default_block(std::size_t item);
/// LZF decompression (liblzf's format); returns the size, or throws if it does not fit.
std::size_t lzf_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity);

}  // namespace ooc::hdf5::filters
