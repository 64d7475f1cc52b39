#include "format/codecs.hpp"

#include <blosc.h>
#include <libdeflate.h>
#include <lz4.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <string>

namespace ooc::codecs {
namespace {

// One libdeflate decompressor per thread (they are not shared between threads).
libdeflate_decompressor* deflater() {
  struct Owner {
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    ~Owner() { libdeflate_free_decompressor(d); }
  };
  thread_local Owner owner;
  if (owner.d == nullptr) throw std::bad_alloc();
  return owner.d;
}

// One libdeflate compressor per thread and level.
libdeflate_compressor* compressor(int level) {
  struct Owner {
    libdeflate_compressor* c[13] = {};
    ~Owner() {
      for (auto* p : c)
        if (p) libdeflate_free_compressor(p);
    }
  };
  thread_local Owner owner;
  level = std::clamp(level, 0, 12);
  if (owner.c[level] == nullptr) owner.c[level] = libdeflate_alloc_compressor(level);
  if (owner.c[level] == nullptr) throw std::bad_alloc();
  return owner.c[level];
}

// libdeflate first; it refuses some streams zlib accepts (a stream that ends without its
// final block marked, say), so zlib has the last word, as in HDF5's own filter.
// `window_bits`: zlib's MAX_WBITS for a zlib stream, 16 + MAX_WBITS for gzip.
std::size_t inflate_stream(std::span<const std::byte> in, std::byte* out, std::size_t capacity, bool gzip) {
  std::size_t actual = 0;
  const libdeflate_result fast =
      gzip ? libdeflate_gzip_decompress(deflater(), in.data(), in.size(), out, capacity, &actual)
           : libdeflate_zlib_decompress(deflater(), in.data(), in.size(), out, capacity, &actual);
  if (fast == LIBDEFLATE_SUCCESS) return actual;
  if (in.size() > std::numeric_limits<uInt>::max() || capacity > std::numeric_limits<uInt>::max())
    throw CodecError("chunk too large for zlib");
  z_stream z{};
  if (inflateInit2(&z, gzip ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) throw std::bad_alloc();
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = static_cast<uInt>(capacity);
  const int status = inflate(&z, Z_FINISH);
  const std::size_t done = capacity - z.avail_out;
  const bool out_full = z.avail_out == 0;
  inflateEnd(&z);
  const char* name = gzip ? "gzip" : "deflate";
  if (status == Z_STREAM_END) return done;
  if (status == Z_BUF_ERROR && out_full)
    throw CodecError(std::string(name) + " data decodes to more than " + std::to_string(capacity) + " bytes");
  throw CodecError(status == Z_BUF_ERROR ? std::string(name) + " data ends early (truncated chunk)"
                                         : std::string("corrupt ") + name + " data");
}

std::size_t deflate_into(std::span<const std::byte> in, int level, std::byte* out, std::size_t capacity, bool gzip) {
  libdeflate_compressor* c = compressor(level);
  const std::size_t size = gzip ? libdeflate_gzip_compress(c, in.data(), in.size(), out, capacity)
                                 : libdeflate_zlib_compress(c, in.data(), in.size(), out, capacity);
  if (size == 0) throw CodecError("deflate could not compress a chunk");
  return size;
}

template <std::size_t K>
void unshuffle_fixed(const std::byte* in, std::byte* out, std::size_t n) {
  // Blocks of elements keep the K input streams and the output in cache.
  constexpr std::size_t kBlock = 4096;
  for (std::size_t lo = 0; lo < n; lo += kBlock) {
    const std::size_t hi = std::min(n, lo + kBlock);
    for (std::size_t i = lo; i < hi; ++i)
      for (std::size_t j = 0; j < K; ++j) out[i * K + j] = in[j * n + i];
  }
}

}  // namespace

std::size_t zlib_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity) {
  return inflate_stream(in, out, capacity, false);
}

std::size_t gzip_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity) {
  return inflate_stream(in, out, capacity, true);
}

std::size_t blosc_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity) {
  std::size_t total = 0;
  if (in.size() < BLOSC_MIN_HEADER_LENGTH || blosc_cbuffer_validate(in.data(), in.size(), &total) < 0)
    throw CodecError("corrupt or truncated blosc data");
  if (total > capacity) throw CodecError("blosc data claims " + std::to_string(total) + " bytes, more than a chunk");
  if (total == 0) return 0;
  const int got = blosc_decompress_ctx(in.data(), out, total, 1);
  if (got <= 0 || static_cast<std::size_t>(got) != total) throw CodecError("corrupt blosc data");
  return total;
}

std::size_t zstd_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity) {
  const unsigned long long claimed = ZSTD_getFrameContentSize(in.data(), in.size());
  if (claimed == ZSTD_CONTENTSIZE_ERROR) throw CodecError("corrupt or truncated zstd data");
  if (claimed != ZSTD_CONTENTSIZE_UNKNOWN && claimed > capacity)
    throw CodecError("zstd data claims " + std::to_string(claimed) + " bytes, more than a chunk");
  const std::size_t got = ZSTD_decompress(out, capacity, in.data(), in.size());
  if (ZSTD_isError(got)) {
    if (ZSTD_getErrorCode(got) == ZSTD_error_dstSize_tooSmall)
      throw CodecError("zstd data decodes to more than " + std::to_string(capacity) + " bytes");
    throw CodecError(std::string("corrupt or truncated zstd data (") + ZSTD_getErrorName(got) + ")");
  }
  return got;
}

void lz4_block_decompress(std::span<const std::byte> in, std::byte* out, std::size_t size) {
  if (in.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      size > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw CodecError("lz4 block too large");
  const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out),
                                      static_cast<int>(in.size()), static_cast<int>(size));
  if (got < 0 || static_cast<std::size_t>(got) != size) throw CodecError("corrupt or truncated lz4 data");
}

std::size_t compress_bound(std::size_t size) {
  const std::size_t lz4 = size <= static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE)
                              ? static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(size)))
                              : 0;
  return std::max({libdeflate_gzip_compress_bound(compressor(6), size), ZSTD_compressBound(size),
                   size + BLOSC_MAX_OVERHEAD, lz4});
}

std::size_t zlib_compress(std::span<const std::byte> in, int level, std::byte* out, std::size_t capacity) {
  return deflate_into(in, level, out, capacity, false);
}

std::size_t gzip_compress(std::span<const std::byte> in, int level, std::byte* out, std::size_t capacity) {
  return deflate_into(in, level, out, capacity, true);
}

std::size_t blosc_compress(std::span<const std::byte> in, std::size_t item, int level, int shuffle, const char* codec,
                           std::byte* out, std::size_t capacity) {
  const int c = blosc_compress_ctx(level, shuffle, item, in.size(), in.data(), out, capacity, codec, 0, 1);
  if (c <= 0) throw CodecError(std::string("blosc could not compress a chunk (codec ") + codec + ")");
  return static_cast<std::size_t>(c);
}

std::size_t zstd_compress(std::span<const std::byte> in, int level, std::byte* out, std::size_t capacity) {
  const std::size_t size = ZSTD_compress(out, capacity, in.data(), in.size(), level);
  if (ZSTD_isError(size)) throw CodecError(std::string("zstd could not compress a chunk: ") + ZSTD_getErrorName(size));
  return size;
}

std::size_t lz4_block_compress(std::span<const std::byte> in, int acceleration, std::byte* out, std::size_t capacity) {
  if (in.size() > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE) ||
      capacity > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw CodecError("chunk too large for lz4");
  const int size = LZ4_compress_fast(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out),
                                     static_cast<int>(in.size()), static_cast<int>(capacity), std::max(1, acceleration));
  if (size <= 0) throw CodecError("lz4 could not compress a chunk");
  return static_cast<std::size_t>(size);
}

int blosc_codec_number(const char* name) { return blosc_compname_to_compcode(name); }

void shuffle(const std::byte* in, std::byte* out, std::size_t size, std::size_t item) {
  const std::size_t n = item > 1 ? size / item : 0;
  if (n <= 1) {
    if (size > 0) std::memcpy(out, in, size);
    return;
  }
  for (std::size_t j = 0; j < item; ++j)
    for (std::size_t i = 0; i < n; ++i) out[j * n + i] = in[i * item + j];
  if (size > n * item) std::memcpy(out + n * item, in + n * item, size - n * item);
}

void unshuffle(const std::byte* in, std::byte* out, std::size_t size, std::size_t item) {
  const std::size_t n = item > 1 ? size / item : 0;
  if (n <= 1) {  // HDF5 leaves such a chunk as it is
    if (size > 0) std::memcpy(out, in, size);
    return;
  }
  switch (item) {
    case 2: unshuffle_fixed<2>(in, out, n); break;
    case 4: unshuffle_fixed<4>(in, out, n); break;
    case 8: unshuffle_fixed<8>(in, out, n); break;
    default:
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < item; ++j) out[i * item + j] = in[j * n + i];
  }
  if (size > n * item) std::memcpy(out + n * item, in + n * item, size - n * item);  // bytes after the last element
}

}  // namespace ooc::codecs
