#include "format/zarr/chunk_codec.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace ooc::zarr {
namespace {

// Delta's decoding: numpy's cumsum in the array's own (native) type.
template <class T>
void running_sum(std::byte* data, std::size_t bytes) {
  const std::size_t n = bytes / sizeof(T);
  if (n == 0) return;
  T sum;
  std::memcpy(&sum, data, sizeof(T));
  for (std::size_t i = 1; i < n; ++i) {
    T x;
    std::memcpy(&x, data + i * sizeof(T), sizeof(T));
    if constexpr (std::is_integral_v<T>) sum = static_cast<T>(static_cast<std::make_unsigned_t<T>>(sum) +
                                                             static_cast<std::make_unsigned_t<T>>(x));
    else sum = sum + x;
    std::memcpy(data + i * sizeof(T), &sum, sizeof(T));
  }
}

void undelta(std::byte* data, std::size_t bytes, DType dtype) {
  switch (dtype.kind()) {
    case Kind::signed_int:
      switch (dtype.itemsize()) {
        case 1: return running_sum<std::int8_t>(data, bytes);
        case 2: return running_sum<std::int16_t>(data, bytes);
        case 4: return running_sum<std::int32_t>(data, bytes);
        default: return running_sum<std::int64_t>(data, bytes);
      }
    case Kind::unsigned_int:
      switch (dtype.itemsize()) {
        case 1: return running_sum<std::uint8_t>(data, bytes);
        case 2: return running_sum<std::uint16_t>(data, bytes);
        case 4: return running_sum<std::uint32_t>(data, bytes);
        default: return running_sum<std::uint64_t>(data, bytes);
      }
    default:
      if (dtype.itemsize() == 4) return running_sum<float>(data, bytes);
      return running_sum<double>(data, bytes);
  }
}

std::uint32_t load_le32(const std::byte* p) {
  return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16) | (std::uint32_t(p[3]) << 24);
}

// The compressor undone into `out` (`capacity` bytes); returns the decoded size.
std::size_t decompress(std::span<const std::byte> in, const Codec& c, std::byte* out, std::size_t capacity) {
  if (c.id == "blosc") return codecs::blosc_decompress(in, out, capacity);
  if (c.id == "zlib") return codecs::zlib_decompress(in, out, capacity);
  if (c.id == "gzip") return codecs::gzip_decompress(in, out, capacity);
  if (c.id == "zstd") return codecs::zstd_decompress(in, out, capacity);
  // numcodecs' LZ4: the decoded size (4 bytes, little endian), then one LZ4 block.
  if (in.size() < 4) throw codecs::CodecError("lz4 chunk shorter than its header");
  const std::uint32_t size = load_le32(in.data());
  if (size > capacity) throw codecs::CodecError("lz4 chunk claims " + std::to_string(size) + " bytes, more than a chunk");
  codecs::lz4_block_decompress(in.subspan(4), out, size);
  return size;
}

}  // namespace

void decode_chunk(std::span<const std::byte> stored, const Metadata& m, std::size_t chunk_bytes, std::byte* out,
                  ChunkScratch& scratch) {
  // Filters undone last to first; the compressor writes where the first filter reads,
  // each filter into the other buffer, the last into `out`. An astype filter changes the
  // item size: bytes(i) is the chunk's size with filters [0, i) applied.
  const std::size_t elements = chunk_bytes / static_cast<std::size_t>(m.dtype.itemsize());
  auto dtype_after = [&](std::size_t i) {  // the chunk's dtype with filters [0, i) applied
    DType d = m.dtype;
    for (std::size_t f = 0; f < i; ++f)
      if (m.filters[f].id == "astype") d = m.filters[f].stored;
    return d;
  };
  auto bytes = [&](std::size_t i) { return elements * static_cast<std::size_t>(dtype_after(i).itemsize()); };
  std::span<const std::byte> current = stored;
  std::vector<std::byte>* spare[2] = {&scratch.a, &scratch.b};
  int next = 0;
  auto target = [&](bool last, std::size_t size) -> std::byte* {
    if (last) return out;
    std::vector<std::byte>& v = *spare[next];
    next ^= 1;
    if (v.size() < size) v.resize(size);
    return v.data();
  };
  const std::size_t encoded = bytes(m.filters.size());
  if (m.compressor) {
    std::byte* to = target(m.filters.empty(), encoded);
    const std::size_t size = decompress(current, *m.compressor, to, encoded);
    if (size != encoded)
      throw codecs::CodecError(m.compressor->id + " data decodes to " + std::to_string(size) + " bytes, not the chunk's " +
                               std::to_string(encoded));
    current = std::span<const std::byte>(to, size);
  } else if (current.size() != encoded) {
    throw codecs::CodecError("uncompressed chunk of " + std::to_string(current.size()) + " bytes, not the chunk's " +
                             std::to_string(encoded));
  }
  for (std::size_t i = m.filters.size(); i-- > 0;) {
    const Codec& f = m.filters[i];
    const std::size_t size = bytes(i);
    std::byte* to = target(i == 0, size);
    if (f.id == "shuffle") {
      codecs::unshuffle(current.data(), to, size, f.item);
    } else if (f.id == "astype") {  // numpy's astype, from the stored dtype to the one before it
      convert(f.stored, current.data(), dtype_after(i), to, static_cast<std::int64_t>(elements));
    } else {  // delta
      if (to != current.data()) std::memmove(to, current.data(), size);
      undelta(to, size, f.stored);
    }
    current = std::span<const std::byte>(to, size);
  }
  if (m.filters.empty() && !m.compressor) std::memcpy(out, stored.data(), chunk_bytes);
}

std::span<const std::byte> encode_chunk(std::span<const std::byte> elements, const std::optional<Codec>& compressor,
                                        const std::vector<Codec>& filters, std::size_t item, ChunkScratch& scratch) {
  std::span<const std::byte> current = elements;
  const std::size_t n = elements.size();
  for (const Codec& f : filters) {
    std::vector<std::byte>& v = current.data() == scratch.a.data() ? scratch.b : scratch.a;
    if (v.size() < n) v.resize(n);
    if (f.id == "shuffle") {
      codecs::shuffle(current.data(), v.data(), n, f.item);
    } else {
      throw codecs::CodecError("filter " + f.id + " is not one ooc encodes");
    }
    current = std::span<const std::byte>(v.data(), n);
  }
  if (!compressor) return current;
  std::vector<std::byte>& v = current.data() == scratch.a.data() ? scratch.b : scratch.a;
  const std::size_t bound = codecs::compress_bound(n) + 4;
  if (v.size() < bound) v.resize(bound);
  const Codec& c = *compressor;
  std::size_t size = 0;
  if (c.id == "blosc") {
    size = codecs::blosc_compress(current, item, c.level, c.shuffle, c.cname.c_str(), v.data(), bound);
  } else if (c.id == "zlib") {
    size = codecs::zlib_compress(current, c.level, v.data(), bound);
  } else if (c.id == "gzip") {
    size = codecs::gzip_compress(current, c.level, v.data(), bound);
  } else if (c.id == "zstd") {
    size = codecs::zstd_compress(current, c.level, v.data(), bound);
  } else {  // lz4, numcodecs' framing
    const auto total = static_cast<std::uint32_t>(n);
    for (int b = 0; b < 4; ++b) v[static_cast<std::size_t>(b)] = std::byte((total >> (8 * b)) & 0xff);
    size = 4 + codecs::lz4_block_compress(current, c.level, v.data() + 4, bound - 4);
  }
  return std::span<const std::byte>(v.data(), size);
}

}  // namespace ooc::zarr
