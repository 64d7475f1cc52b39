// src/format/hdf5_filters: the chunk codecs ooc runs itself. Each decodes what the real
// encoder (zlib, liblz4 in the HDF5 LZ4 filter's framing, Blosc) wrote, and refuses
// corrupt or truncated input with a FilterError, never reading or writing out of bounds.

#include "format/hdf5/filters.hpp"

#include <blosc.h>
#include <lz4.h>
#include <zlib.h>

#include <doctest/doctest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace f = ooc::hdf5::filters;

namespace {

std::vector<std::byte> sample(std::size_t n, unsigned seed = 1) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::byte(i % 7 == 0 ? rng() % 256 : (i / 13) % 5);
  return v;
}

std::vector<std::byte> zlib_compress(const std::vector<std::byte>& in) {
  uLongf size = compressBound(in.size());
  std::vector<std::byte> out(size);
  REQUIRE(compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(in.data()), in.size(), 1) ==
          Z_OK);
  out.resize(size);
  return out;
}

void put_be(std::vector<std::byte>& out, std::uint64_t value, int bytes) {
  for (int k = bytes - 1; k >= 0; --k) out.push_back(std::byte((value >> (8 * k)) & 0xff));
}

// The HDF5 LZ4 filter's framing of liblz4 blocks.
std::vector<std::byte> lz4_compress(const std::vector<std::byte>& in, std::size_t block) {
  std::vector<std::byte> out;
  put_be(out, in.size(), 8);
  put_be(out, block, 4);
  for (std::size_t at = 0; at < in.size(); at += block) {
    const std::size_t n = std::min(block, in.size() - at);
    std::vector<char> tmp(LZ4_compressBound(static_cast<int>(n)));
    int c = LZ4_compress_default(reinterpret_cast<const char*>(in.data() + at), tmp.data(), static_cast<int>(n),
                                 static_cast<int>(tmp.size()));
    if (c >= static_cast<int>(n)) {  // stored as is
      put_be(out, n, 4);
      out.insert(out.end(), in.begin() + at, in.begin() + at + n);
    } else {
      put_be(out, c, 4);
      for (int k = 0; k < c; ++k) out.push_back(std::byte(tmp[k]));
    }
  }
  return out;
}

std::vector<std::byte> shuffle(const std::vector<std::byte>& in, std::size_t item) {
  std::vector<std::byte> out(in);
  const std::size_t n = in.size() / item;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < item; ++j) out[j * n + i] = in[i * item + j];
  return out;
}

std::vector<std::byte> decode(const std::vector<std::byte>& stored, const std::vector<f::Filter>& pipeline,
                              std::size_t item, std::size_t bytes) {
  f::Scratch scratch;
  const std::byte* p = f::decode(stored, pipeline, item, bytes, scratch);
  std::vector<std::byte> out(p, p + bytes);
  std::vector<std::byte> direct(bytes);  // the same, decoded in place
  f::decode(stored, pipeline, item, bytes, scratch, direct.data());
  CHECK(direct == out);
  return out;
}

}  // namespace

TEST_CASE("fletcher32 sums big-endian 16-bit words as HDF5 does, odd lengths too") {
  const std::vector<std::byte> one{std::byte{0}, std::byte{1}};  // one 16-bit word, big endian: 1
  CHECK(f::fletcher32(one.data(), 2) == 0x00010001u);
  const std::vector<std::byte> odd{std::byte{0}, std::byte{1}, std::byte{2}};  // a last half word: 0x0200
  CHECK(f::fletcher32(odd.data(), 3) == ((0x0001u + 0x0201u) << 16 | 0x0201u));
  std::vector<std::byte> zeros(1000);
  CHECK(f::fletcher32(zeros.data(), zeros.size()) == 0u);
}

TEST_CASE("unshuffle undoes the byte shuffle for every item size, with trailing bytes") {
  for (std::size_t item : {1u, 2u, 3u, 4u, 8u, 16u})
    for (std::size_t size : {0u, 1u, 7u, 64u, 1001u}) {
      const auto data = sample(size, static_cast<unsigned>(item));
      const auto shuffled = shuffle(data, item);
      std::vector<std::byte> back(size);
      f::unshuffle(shuffled.data(), back.data(), size, item);
      CHECK(back == data);
    }
}

TEST_CASE("deflate, shuffle and fletcher32 chains decode; corruption and truncation are FilterErrors") {
  const auto data = sample(40000);
  const std::vector<f::Filter> gz{{f::kShuffle, {4}}, {f::kDeflate, {1}}};
  auto stored = zlib_compress(shuffle(data, 4));
  CHECK(decode(stored, gz, 4, data.size()) == data);
  // With a checksum after deflate, as h5py writes fletcher32=True.
  auto summed = stored;
  const std::uint32_t sum = f::fletcher32(summed.data(), summed.size());
  for (int k = 0; k < 4; ++k) summed.push_back(std::byte((sum >> (8 * k)) & 0xff));
  const std::vector<f::Filter> gz_sum{{f::kShuffle, {4}}, {f::kDeflate, {1}}, {f::kFletcher32, {}}};
  CHECK(decode(summed, gz_sum, 4, data.size()) == data);
  f::Scratch scratch;
  auto flipped = summed;
  flipped[summed.size() / 2] ^= std::byte{0x10};
  CHECK_THROWS_WITH_AS(f::decode(flipped, gz_sum, 4, data.size(), scratch), doctest::Contains("checksum"),
                       f::FilterError);
  auto bad = stored;
  for (std::size_t i = 2; i < bad.size(); i += 3) bad[i] ^= std::byte{0x5a};
  CHECK_THROWS_AS(f::decode(bad, gz, 4, data.size(), scratch), f::FilterError);
  auto cut = std::vector<std::byte>(stored.begin(), stored.begin() + static_cast<std::ptrdiff_t>(stored.size() / 2));
  CHECK_THROWS_AS(f::decode(cut, gz, 4, data.size(), scratch), f::FilterError);
  // A stream that decodes to more or fewer bytes than the chunk holds.
  CHECK_THROWS_AS(f::decode(stored, gz, 4, data.size() - 4, scratch), f::FilterError);
  CHECK_THROWS_WITH_AS(f::decode(stored, {{f::kDeflate, {}}}, 4, data.size() - 4, scratch),
                       doctest::Contains("more than"), f::FilterError);
  CHECK_THROWS_AS(f::decode(stored, gz, 4, data.size() + 4, scratch), f::FilterError);
  CHECK_THROWS_AS(f::decode({}, gz, 4, data.size(), scratch), f::FilterError);
  // A chunk stored without deflate (filter mask bit 1): only unshuffled.
  const auto shuffled = shuffle(data, 4);
  const std::byte* p = f::decode(shuffled, gz, 4, data.size(), scratch, nullptr, 0b10);
  CHECK(std::vector<std::byte>(p, p + data.size()) == data);
  const std::byte* q = f::decode(data, gz, 4, data.size(), scratch, nullptr, 0b11);  // stored as is
  CHECK(std::vector<std::byte>(q, q + data.size()) == data);
}

TEST_CASE("lz4 in the HDF5 LZ4 filter's blocks decodes, stored blocks too; a lying header is refused") {
  const auto data = sample(100000, 3);
  const std::vector<f::Filter> lz{{f::kShuffle, {8}}, {f::kLz4, {}}};
  for (std::size_t block : {1000u, 1u << 30}) {
    const auto stored = lz4_compress(shuffle(data, 8), std::min<std::size_t>(block, data.size()));
    CHECK(decode(stored, lz, 8, data.size()) == data);
  }
  std::vector<std::byte> noise(5000);
  std::mt19937 rng(5);
  for (auto& b : noise) b = std::byte(rng());
  CHECK(decode(lz4_compress(noise, 512), {{f::kLz4, {}}}, 1, noise.size()) == noise);  // stored blocks
  f::Scratch scratch;
  auto stored = lz4_compress(data, 4096);
  auto cut = std::vector<std::byte>(stored.begin(), stored.end() - 10);
  CHECK_THROWS_AS(f::decode(cut, {{f::kLz4, {}}}, 1, data.size(), scratch), f::FilterError);
  auto huge = stored;
  huge[0] = std::byte{0x7f};  // claims an enormous size
  CHECK_THROWS_AS(f::decode(huge, {{f::kLz4, {}}}, 1, data.size(), scratch), f::FilterError);
  auto bad = stored;
  for (std::size_t i = 20; i < bad.size(); i += 5) bad[i] ^= std::byte{0xff};
  CHECK_THROWS_AS(f::decode(bad, {{f::kLz4, {}}}, 1, data.size(), scratch), f::FilterError);
}

TEST_CASE("blosc buffers decode with each codec and shuffle; truncated ones are refused") {
  const auto data = sample(65536, 4);
  for (const char* codec : {"blosclz", "lz4", "zlib", "zstd"}) {
    std::vector<std::byte> stored(data.size() + BLOSC_MAX_OVERHEAD);
    const int n = blosc_compress_ctx(5, BLOSC_SHUFFLE, 4, data.size(), data.data(), stored.data(), stored.size(), codec,
                                     0, 1);
    REQUIRE(n > 0);
    stored.resize(static_cast<std::size_t>(n));
    CHECK(decode(stored, {{f::kBlosc, {2, 2, 4, 65536, 5, 1, 0}}}, 4, data.size()) == data);
    f::Scratch scratch;
    auto cut = std::vector<std::byte>(stored.begin(), stored.begin() + static_cast<std::ptrdiff_t>(stored.size() / 2));
    CHECK_THROWS_AS(f::decode(cut, {{f::kBlosc, {}}}, 4, data.size(), scratch), f::FilterError);
  }
}

TEST_CASE("lzf decodes literal runs and back references, and refuses what points outside") {
  // "abcabcabcabc": 3 literals, then a back reference of 9 bytes at distance 3.
  const std::vector<std::byte> stored{std::byte{2}, std::byte{'a'}, std::byte{'b'}, std::byte{'c'},
                                      std::byte{(7 << 5) | 0}, std::byte{0}, std::byte{2}};
  std::vector<std::byte> out(12);
  REQUIRE(f::lzf_decompress(stored, out.data(), out.size()) == 12);
  CHECK(std::memcmp(out.data(), "abcabcabcabc", 12) == 0);
  CHECK_THROWS_AS(f::lzf_decompress(stored, out.data(), 11), f::FilterError);  // does not fit
  const std::vector<std::byte> far{std::byte{0}, std::byte{'a'}, std::byte{(1 << 5) | 0}, std::byte{5}};
  CHECK_THROWS_AS(f::lzf_decompress(far, out.data(), out.size()), f::FilterError);
  const std::vector<std::byte> short_literal{std::byte{5}, std::byte{'a'}};
  CHECK_THROWS_AS(f::lzf_decompress(short_literal, out.data(), out.size()), f::FilterError);
}

TEST_CASE("what encode writes, decode reads back, for every pipeline ooc writes") {
  const std::vector<std::vector<f::Filter>> pipelines{
      {{f::kDeflate, {1}}},
      {{f::kShuffle, {}}, {f::kDeflate, {9}}},
      {{f::kLz4, {}}},
      {{f::kShuffle, {}}, {f::kLz4, {}}},
      {{f::kBlosc, {2, 2, 4, 0, 5, 1, 5}}},  // zstd, shuffle
      {{f::kBlosc, {2, 2, 4, 0, 1, 0, 1}}},  // lz4, no shuffle
  };
  std::vector<std::byte> noise(9999);
  std::mt19937 rng(9);
  for (auto& b : noise) b = std::byte(rng());
  for (const auto& data : {sample(40000, 6), noise, std::vector<std::byte>(4)})
    for (const auto& pipeline : pipelines) {
      f::Scratch scratch;
      std::vector<std::byte> stored;
      f::encode(data, pipeline, 4, scratch, stored);
      CHECK(decode(stored, pipeline, 4, data.size()) == data);
    }
}

TEST_CASE("bitshuffle: bit b of byte j of element i is bit i % 8 of byte i / 8 of row 8j + b") {
  // Eight uint16: element 0 is 1 (bit 0 of byte 0), element 7 is 3 (bits 0 and 1 of byte 0).
  std::vector<std::byte> stored(16, std::byte{0});
  stored[0] = std::byte{0b10000001};  // row 0 (byte 0, bit 0): elements 0 and 7
  stored[1] = std::byte{0b10000000};  // row 1 (byte 0, bit 1): element 7
  const std::vector<f::Filter> pipeline{{f::kBitshuffle, {0, 4, 2, 0, 0}}};
  f::Scratch scratch;
  const std::byte* out = f::decode(stored, pipeline, 2, 16, scratch);
  std::uint16_t values[8];
  std::memcpy(values, out, 16);
  CHECK(values[0] == 1);
  for (int i = 1; i < 7; ++i) CHECK(values[i] == 0);
  CHECK(values[7] == 3);
  // The last size % 8 elements are stored as they are: 10 elements, 2 left raw.
  std::vector<std::byte> more(20, std::byte{0});
  more[16] = std::byte{0x34};
  more[19] = std::byte{0x12};
  out = f::decode(more, pipeline, 2, 20, scratch);
  std::memcpy(values, out + 16, 4);
  CHECK(values[0] == 0x34);
  CHECK(values[1] == 0x1200);
}

TEST_CASE("bitshuffle with lz4: a header, sized blocks; lies and truncation are FilterErrors") {
  const std::vector<std::byte> plain = sample(4096 * 4);  // 4096 float32-sized elements
  // Transposed by the bit rule above, in blocks of 1024 elements, each LZ4-compressed.
  auto transpose = [](const std::byte* in, std::byte* out, std::size_t n, std::size_t item) {
    std::memset(out, 0, n * item);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < item; ++j)
        for (std::size_t b = 0; b < 8; ++b)
          if ((std::to_integer<unsigned>(in[i * item + j]) >> b) & 1u)
            out[(8 * j + b) * (n / 8) + i / 8] |= std::byte(1u << (i % 8));
  };
  const std::size_t item = 4, block = 1024;
  std::vector<std::byte> stored(12, std::byte{0});
  const std::uint64_t total = plain.size();
  for (int k = 0; k < 8; ++k) stored[k] = std::byte((total >> (8 * (7 - k))) & 0xff);
  for (int k = 0; k < 4; ++k) stored[8 + k] = std::byte(((block * item) >> (8 * (3 - k))) & 0xff);
  std::vector<std::byte> t(block * item), c(LZ4_compressBound(static_cast<int>(block * item)));
  for (std::size_t at = 0; at < plain.size(); at += block * item) {
    transpose(plain.data() + at, t.data(), block, item);
    const int n = LZ4_compress_default(reinterpret_cast<const char*>(t.data()), reinterpret_cast<char*>(c.data()),
                                       static_cast<int>(t.size()), static_cast<int>(c.size()));
    for (int k = 0; k < 4; ++k) stored.push_back(std::byte((static_cast<unsigned>(n) >> (8 * (3 - k))) & 0xff));
    stored.insert(stored.end(), c.begin(), c.begin() + n);
  }
  const std::vector<f::Filter> pipeline{{f::kBitshuffle, {0, 4, 4, 0, 2}}};
  f::Scratch scratch;
  const std::byte* out = f::decode(stored, pipeline, item, plain.size(), scratch);
  CHECK(std::memcmp(out, plain.data(), plain.size()) == 0);
  std::vector<std::byte> cut(stored.begin(), stored.begin() + static_cast<std::ptrdiff_t>(stored.size() / 2));
  CHECK_THROWS_AS(f::decode(cut, pipeline, item, plain.size(), scratch), f::FilterError);
  std::vector<std::byte> liar = stored;
  liar[0] = std::byte{0x7f};  // claims far more than a chunk
  CHECK_THROWS_AS(f::decode(liar, pipeline, item, plain.size(), scratch), f::FilterError);
  std::vector<std::byte> odd_block = stored;
  odd_block[11] = std::byte{0x04};  // 4 bytes: one element, not a multiple of 8
  odd_block[10] = std::byte{0};
  CHECK_THROWS_AS(f::decode(odd_block, pipeline, item, plain.size(), scratch), f::FilterError);
}
