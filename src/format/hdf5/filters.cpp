#include "format/hdf5/filters.hpp"

#include "format/codecs.hpp"

#include <blosc.h>
#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace ooc::hdf5::filters {
namespace {

std::uint32_t be32(const std::byte* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | std::uint32_t(p[3]);
}
std::uint64_t be64(const std::byte* p) { return (std::uint64_t(be32(p)) << 32) | be32(p + 4); }

// The HDF5 LZ4 filter (32004): an 8-byte original size and a 4-byte block size, both big
// endian, then per block its 4-byte compressed size and LZ4 data (stored as is when it
// did not shrink).
std::size_t unlz4(std::span<const std::byte> in, std::byte* out, std::size_t capacity) {
  if (in.size() < 12) throw FilterError("lz4 chunk shorter than its header");
  const std::uint64_t total = be64(in.data());
  std::uint64_t block = be32(in.data() + 8);
  if (total > capacity) throw FilterError("lz4 chunk claims " + std::to_string(total) + " bytes, more than a chunk");
  if (block == 0 && total > 0) throw FilterError("lz4 chunk has a block size of 0");
  block = std::min(block, total);
  std::size_t at = 12;
  std::uint64_t done = 0;
  while (done < total) {
    const std::uint64_t want = std::min(block, total - done);
    if (in.size() - at < 4) throw FilterError("lz4 chunk ends early (truncated chunk)");
    const std::uint32_t stored = be32(in.data() + at);
    at += 4;
    if (stored > in.size() - at) throw FilterError("lz4 chunk ends early (truncated chunk)");
    if (stored == want) {
      std::memcpy(out + done, in.data() + at, want);
    } else {
      if (stored > static_cast<std::uint32_t>(std::numeric_limits<int>::max()) ||
          want > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
        throw FilterError("lz4 block too large");
      const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data() + at), reinterpret_cast<char*>(out + done),
                                          static_cast<int>(stored), static_cast<int>(want));
      if (got < 0 || static_cast<std::uint64_t>(got) != want) throw FilterError("corrupt lz4 data");
    }
    at += stored;
    done += want;
  }
  return static_cast<std::size_t>(total);
}

// Bitshuffle's transpose of an 8x8 matrix of bits held in a word (byte m, bit b <-> byte
// b, bit m), as its TRANS_BIT_8X8 on a little-endian machine.
inline std::uint64_t transpose_bits_8x8(std::uint64_t x) {
  std::uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x = x ^ t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x = x ^ t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  return x ^ t ^ (t << 28);
}

// Undoes bitshuffle's transpose of one block of `n` (a multiple of 8) elements of `item`
// bytes: `in` holds 8 * item rows of n / 8 bytes, row 8 * j + b the bit b of byte j of
// every element, element i at bit i % 8 of byte i / 8.
void bitunshuffle_block(const std::byte* in, std::byte* out, std::size_t n, std::size_t item) {
  const std::size_t row = n / 8;
  const auto* src = reinterpret_cast<const std::uint8_t*>(in);
  auto* dst = reinterpret_cast<std::uint8_t*>(out);
  for (std::size_t j = 0; j < item; ++j) {
    const std::uint8_t* rows = src + j * 8 * row;
    for (std::size_t g = 0; g < row; ++g) {
      std::uint64_t x = 0;
      for (std::size_t b = 0; b < 8; ++b) x |= std::uint64_t(rows[b * row + g]) << (8 * b);
      x = transpose_bits_8x8(x);
      std::uint8_t* to = dst + 8 * g * item + j;
      for (std::size_t m = 0; m < 8; ++m) to[m * item] = static_cast<std::uint8_t>(x >> (8 * m));
    }
  }
}

}  // namespace

std::size_t bitshuffle_default_block(std::size_t item) {
  return std::max<std::size_t>(8192 / item / 8 * 8, 128);
}

void bitunshuffle(const std::byte* in, std::byte* out, std::size_t elements, std::size_t item, std::size_t block) {
  if (block == 0) block = bitshuffle_default_block(item);
  std::size_t done = 0;
  while (elements - done >= 8) {
    const std::size_t n = std::min(block, (elements - done) / 8 * 8);
    bitunshuffle_block(in + done * item, out + done * item, n, item);
    done += n;
  }
  if (elements > done) std::memcpy(out + done * item, in + done * item, (elements - done) * item);
}

namespace {

// The bitshuffle filter (32008): values [major, minor, item, block, compression, level].
// Without compression the chunk is the transposed blocks (then the last size % 8
// elements as they are); with lz4 (2) or zstd (3), an 8-byte big-endian byte count and a
// 4-byte big-endian block size in bytes, then per block a 4-byte big-endian size and an
// LZ4 block (zstd frame) of the transposed block, then the last elements as they are.
std::size_t unbitshuffle(std::span<const std::byte> in, std::byte* out, std::size_t capacity,
                         const std::vector<unsigned>& values) {
  if (values.size() < 3 || values[2] == 0) throw FilterError("bitshuffle filter without its element size");
  const std::size_t item = values[2];
  std::size_t block = values.size() > 3 ? values[3] : 0;
  const unsigned compression = values.size() > 4 ? values[4] : 0;
  if (compression == 0) {
    if (in.size() > capacity) throw FilterError("bitshuffled data larger than a chunk");
    if (in.size() % item != 0) throw FilterError("bitshuffled data is not a whole number of elements");
    if (block % 8 != 0) throw FilterError("bitshuffle block size " + std::to_string(block) + " is not a multiple of 8");
    bitunshuffle(in.data(), out, in.size() / item, item, block);
    return in.size();
  }
  if (compression != 2 && compression != 3)
    throw FilterError("bitshuffle compression " + std::to_string(compression) + " is not lz4 (2) or zstd (3)");
  if (in.size() < 12) throw FilterError("bitshuffle chunk shorter than its header");
  const std::uint64_t total = be64(in.data());
  const std::uint32_t block_bytes = be32(in.data() + 8);
  if (total > capacity) throw FilterError("bitshuffle chunk claims " + std::to_string(total) + " bytes, more than a chunk");
  if (total % item != 0) throw FilterError("bitshuffle chunk is not a whole number of elements");
  block = block_bytes / item;
  if (block_bytes % item != 0 || block == 0 || block % 8 != 0)
    throw FilterError("bitshuffle chunk has a block size of " + std::to_string(block_bytes) + " bytes");
  const std::size_t elements = static_cast<std::size_t>(total) / item;
  thread_local std::vector<std::byte> shuffled;
  std::size_t at = 12, done = 0;
  while (elements - done >= 8) {
    const std::size_t n = std::min(block, (elements - done) / 8 * 8);
    const std::size_t bytes = n * item;
    if (in.size() - at < 4) throw FilterError("bitshuffle chunk ends early (truncated chunk)");
    const std::uint32_t stored = be32(in.data() + at);
    at += 4;
    if (stored > in.size() - at) throw FilterError("bitshuffle chunk ends early (truncated chunk)");
    if (shuffled.size() < bytes) shuffled.resize(bytes);
    if (compression == 2) {
      if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
          stored > static_cast<std::uint32_t>(std::numeric_limits<int>::max()))
        throw FilterError("bitshuffle block too large");
      const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data() + at),
                                          reinterpret_cast<char*>(shuffled.data()), static_cast<int>(stored),
                                          static_cast<int>(bytes));
      if (got < 0 || static_cast<std::size_t>(got) != bytes) throw FilterError("corrupt lz4 data in a bitshuffle block");
    } else {
      const std::size_t got = ZSTD_decompress(shuffled.data(), bytes, in.data() + at, stored);
      if (ZSTD_isError(got) || got != bytes) throw FilterError("corrupt zstd data in a bitshuffle block");
    }
    bitunshuffle_block(shuffled.data(), out + done * item, n, item);
    at += stored;
    done += n;
  }
  const std::size_t rest = (elements - done) * item;
  if (in.size() - at < rest) throw FilterError("bitshuffle chunk ends early (truncated chunk)");
  if (rest > 0) std::memcpy(out + done * item, in.data() + at, rest);
  return static_cast<std::size_t>(total);
}


}  // namespace

void encode(std::span<const std::byte> elements, const std::vector<Filter>& pipeline, std::size_t item,
            Scratch& scratch, std::vector<std::byte>& out) {
  std::span<const std::byte> current = elements;
  int holder = 0;  // 0: `elements`, 1: scratch.a, 2: scratch.b
  for (const Filter& f : pipeline) {
    std::vector<std::byte>& v = holder == 1 ? scratch.b : scratch.a;
    const int next = holder == 1 ? 2 : 1;
    const std::size_t n = current.size();
    std::size_t size = 0;
    switch (f.id) {
      case kShuffle: {
        const std::size_t k = !f.values.empty() && f.values[0] > 0 ? f.values[0] : item;
        if (v.size() < n) v.resize(n);
        codecs::shuffle(current.data(), v.data(), n, k);
        size = n;
        break;
      }
      case kDeflate: {
        const std::size_t bound = codecs::compress_bound(n);
        if (v.size() < bound) v.resize(bound);
        size = codecs::zlib_compress(current, f.values.empty() ? 6 : static_cast<int>(f.values[0]), v.data(), bound);
        break;
      }
      case kLz4: {  // one block (the filter's default block is 1 GiB), stored as is when it does not shrink
        if (n > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE)) throw FilterError("chunk too large for lz4");
        const std::size_t bound = 16 + static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(n)));
        if (v.size() < bound) v.resize(bound);
        auto put32 = [&](std::size_t at, std::uint64_t x) {
          for (int b = 0; b < 4; ++b) v[at + b] = std::byte((x >> (8 * (3 - b))) & 0xff);
        };
        put32(0, static_cast<std::uint64_t>(n) >> 32);
        put32(4, n & 0xffffffffu);
        put32(8, n);
        if (n == 0) {
          size = 12;
          break;
        }
        const int c = LZ4_compress_default(reinterpret_cast<const char*>(current.data()),
                                           reinterpret_cast<char*>(v.data() + 16), static_cast<int>(n),
                                           static_cast<int>(bound - 16));
        if (c <= 0 || static_cast<std::size_t>(c) >= n) {
          put32(12, n);
          std::memcpy(v.data() + 16, current.data(), n);
          size = 16 + n;
        } else {
          put32(12, static_cast<std::size_t>(c));
          size = 16 + static_cast<std::size_t>(c);
        }
        break;
      }
      case kBlosc: {
        const int level = f.values.size() > 4 ? static_cast<int>(f.values[4]) : 5;
        const int shuffle = f.values.size() > 5 ? static_cast<int>(f.values[5]) : 1;
        const char* codec = "blosclz";
        if (f.values.size() > 6 && blosc_compcode_to_compname(static_cast<int>(f.values[6]), &codec) < 0)
          throw FilterError("unknown blosc codec " + std::to_string(f.values[6]));
        const std::size_t bound = codecs::compress_bound(n);
        if (v.size() < bound) v.resize(bound);
        size = codecs::blosc_compress(current, item, level, shuffle, codec, v.data(), bound);
        break;
      }
      default: throw FilterError("filter " + std::to_string(f.id) + " is not one ooc encodes");
    }
    current = std::span<const std::byte>(v.data(), size);
    holder = next;
  }
  out.assign(current.begin(), current.end());
}

int blosc_codec_number(const char* name) { return codecs::blosc_codec_number(name); }

bool decodable(unsigned id) {
  return id == kDeflate || id == kShuffle || id == kFletcher32 || id == kLzf || id == kBlosc || id == kLz4 ||
         id == kBitshuffle;
}

const char* name_of(unsigned id) {
  switch (id) {
    case kDeflate: return "deflate";
    case kShuffle: return "shuffle";
    case kFletcher32: return "fletcher32";
    case kLzf: return "lzf";
    case kBlosc: return "blosc";
    case kLz4: return "lz4";
    case kBitshuffle: return "bitshuffle";
    default: return "";
  }
}

void unshuffle(const std::byte* in, std::byte* out, std::size_t size, std::size_t item) {
  codecs::unshuffle(in, out, size, item);
}

std::uint32_t fletcher32(const std::byte* data, std::size_t size) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(data);
  std::size_t words = size / 2;
  std::uint32_t sum1 = 0, sum2 = 0;
  while (words > 0) {
    std::size_t run = std::min<std::size_t>(words, 360);
    words -= run;
    do {
      sum1 += (std::uint32_t(p[0]) << 8) | std::uint32_t(p[1]);
      p += 2;
      sum2 += sum1;
    } while (--run);
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (size % 2) {
    sum1 += std::uint32_t(*p) << 8;
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return (sum2 << 16) | sum1;
}

std::size_t lzf_decompress(std::span<const std::byte> in, std::byte* out, std::size_t capacity) {
  const auto* ip = reinterpret_cast<const std::uint8_t*>(in.data());
  const auto* const in_end = ip + in.size();
  auto* op = reinterpret_cast<std::uint8_t*>(out);
  auto* const out_begin = op;
  auto* const out_end = op + capacity;
  while (ip < in_end) {
    std::size_t ctrl = *ip++;
    if (ctrl < 32) {  // a literal run of ctrl + 1 bytes
      ++ctrl;
      if (ctrl > static_cast<std::size_t>(out_end - op)) throw FilterError("lzf data decodes to more than a chunk");
      if (ctrl > static_cast<std::size_t>(in_end - ip)) throw FilterError("lzf data ends early (truncated chunk)");
      std::memcpy(op, ip, ctrl);
      op += ctrl;
      ip += ctrl;
    } else {  // a back reference
      std::size_t len = ctrl >> 5;
      std::size_t back = (ctrl & 0x1f) << 8;
      if (ip >= in_end) throw FilterError("lzf data ends early (truncated chunk)");
      if (len == 7) {
        len += *ip++;
        if (ip >= in_end) throw FilterError("lzf data ends early (truncated chunk)");
      }
      back += *ip++;
      len += 2;
      if (back + 1 > static_cast<std::size_t>(op - out_begin)) throw FilterError("corrupt lzf data");
      if (len > static_cast<std::size_t>(out_end - op)) throw FilterError("lzf data decodes to more than a chunk");
      const std::uint8_t* ref = op - back - 1;
      for (std::size_t k = 0; k < len; ++k) op[k] = ref[k];  // may overlap: byte by byte
      op += len;
    }
  }
  return static_cast<std::size_t>(op - out_begin);
}

const std::byte* decode(std::span<const std::byte> stored, const std::vector<Filter>& pipeline, std::size_t item,
                        std::size_t chunk_bytes, Scratch& scratch, std::byte* direct, std::uint32_t mask) {
  // A result between two filters is at most this large (the filters that grow data, the
  // codecs' headers and stored blocks, add far less).
  const std::size_t bound = chunk_bytes + chunk_bytes / 2 + (std::size_t{1} << 16);
  std::span<const std::byte> current = stored;
  int holder = 0;  // 0: `stored` or `direct`, 1: scratch.a, 2: scratch.b
  bool in_direct = false;
  // The first filter applied when writing (not skipped) is the one that yields the elements.
  std::size_t first = 0;
  while (first < pipeline.size() && first < 32 && (mask >> first & 1u)) ++first;
  for (std::size_t i = pipeline.size(); i-- > 0;) {
    const Filter& f = pipeline[i];
    if (i < 32 && (mask >> i & 1u)) continue;
    if (f.id == kFletcher32) {
      if (current.size() < 4) throw FilterError("chunk shorter than its fletcher32 checksum");
      const std::size_t size = current.size() - 4;
      const std::uint32_t kept = std::uint32_t(current[size]) | (std::uint32_t(current[size + 1]) << 8) |
                                 (std::uint32_t(current[size + 2]) << 16) | (std::uint32_t(current[size + 3]) << 24);
      const std::uint32_t sum = fletcher32(current.data(), size);
      // Files of HDF5 1.6.0-1.6.2 on little-endian machines hold it with bytes swapped.
      const std::uint32_t swapped = ((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu);
      if (kept != sum && kept != swapped) throw FilterError("fletcher32 checksum mismatch (corrupt chunk)");
      current = current.first(size);
      continue;
    }
    const bool last = i == first;  // this filter's output is the elements
    std::byte* out;
    std::size_t capacity;
    int next_holder;
    if (last && direct != nullptr) {
      out = direct;
      capacity = chunk_bytes;
      next_holder = 0;
    } else {
      std::vector<std::byte>& v = holder == 1 ? scratch.b : scratch.a;
      next_holder = holder == 1 ? 2 : 1;
      capacity = last ? chunk_bytes : bound;
      if (!last) {  // exactly the chunk (and checksums) when only shuffles and checksums remain
        std::size_t sums = 0;
        bool exact = true;
        for (std::size_t k = 0; k < i && exact; ++k) {
          if (k < 32 && (mask >> k & 1u)) continue;
          if (pipeline[k].id == kFletcher32) sums += 4;
          else exact = pipeline[k].id == kShuffle;
        }
        if (exact) capacity = chunk_bytes + sums;
      }
      if (v.size() < capacity) v.resize(capacity);
      out = v.data();
    }
    std::size_t size = 0;
    switch (f.id) {
      case kDeflate: size = codecs::zlib_decompress(current, out, capacity); break;
      case kLz4: size = unlz4(current, out, capacity); break;
      case kBlosc: size = codecs::blosc_decompress(current, out, capacity); break;
      case kLzf: size = lzf_decompress(current, out, capacity); break;
      case kBitshuffle: size = unbitshuffle(current, out, capacity, f.values); break;
      case kShuffle: {
        if (current.size() > capacity) throw FilterError("shuffled data larger than a chunk");
        const std::size_t k = !f.values.empty() && f.values[0] > 0 ? f.values[0] : item;
        unshuffle(current.data(), out, current.size(), k);
        size = current.size();
        break;
      }
      default: throw FilterError("filter " + std::to_string(f.id) + " is not one ooc decodes");
    }
    current = std::span<const std::byte>(out, size);
    holder = next_holder;
    in_direct = out == direct;
  }
  if (current.size() != chunk_bytes) {
    // Named by the filter that gave the elements (bitshuffle alone cannot tell a short chunk).
    const char* by = first < pipeline.size() ? name_of(pipeline[first].id) : "";
    throw FilterError(std::string(by[0] ? by : "the chunk") + " data decodes to " + std::to_string(current.size()) +
                      " bytes, not the chunk's " + std::to_string(chunk_bytes) + " (truncated or corrupt chunk)");
  }
  if (direct == nullptr) {
    if (holder != 0) return current.data();
    // No filter wrote anything (fletcher32 alone): the stored bytes are the elements.
    if (scratch.a.size() < chunk_bytes) scratch.a.resize(chunk_bytes);
    if (chunk_bytes > 0) std::memcpy(scratch.a.data(), current.data(), chunk_bytes);
    return scratch.a.data();
  }
  if (!in_direct && chunk_bytes > 0) std::memmove(direct, current.data(), chunk_bytes);
  return direct;
}

}  // namespace ooc::hdf5::filters
