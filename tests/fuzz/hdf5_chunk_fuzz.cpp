// libFuzzer target for the HDF5 chunk decoders (src/format/hdf5/filters.cpp): built with
// clang's -fsanitize=fuzzer,address,undefined when OOC_FUZZ=ON; seed corpus in
// hdf5_chunk/. The first byte picks a filter pipeline, the next two the chunk's size in
// elements and the item size; the rest is the stored chunk. Any input either decodes to
// exactly the chunk's bytes or is a FilterError, never a read or write out of bounds.

#include "format/hdf5/filters.hpp"

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace f = ooc::hdf5::filters;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  static const std::vector<std::vector<f::Filter>> pipelines{
      {{f::kDeflate, {1}}},
      {{f::kShuffle, {}}, {f::kDeflate, {1}}},
      {{f::kShuffle, {}}, {f::kDeflate, {1}}, {f::kFletcher32, {}}},
      {{f::kFletcher32, {}}},
      {{f::kLz4, {}}},
      {{f::kShuffle, {}}, {f::kLz4, {}}},
      {{f::kBlosc, {}}},
      {{f::kBlosc, {}}, {f::kFletcher32, {}}},
      {{f::kLzf, {}}},
      {{f::kShuffle, {}}, {f::kLzf, {}}, {f::kFletcher32, {}}},
      {{f::kBitshuffle, {0, 0, 4, 0, 0}}},
      {{f::kBitshuffle, {0, 0, 2, 64, 0}}},
      {{f::kBitshuffle, {0, 0, 4, 0, 2}}},
      {{f::kBitshuffle, {0, 0, 8, 0, 3}}},
      {{f::kBitshuffle, {0, 0, 1, 0, 2}}, {f::kFletcher32, {}}},
  };
  const auto& pipeline = pipelines[data[0] % pipelines.size()];
  const std::size_t item = std::size_t{1} << (data[2] % 4);
  const std::size_t elements = 1 + data[1] * 64u;  // up to 16 K elements
  const std::size_t chunk_bytes = elements * item;
  const std::span<const std::byte> stored(reinterpret_cast<const std::byte*>(data + 3), size - 3);
  f::Scratch scratch;
  std::vector<std::byte> direct(chunk_bytes);
  for (std::uint32_t mask : {0u, data[0] >> 4 & 0x7u}) {
    try {
      f::decode(stored, pipeline, item, chunk_bytes, scratch, nullptr, mask);
    } catch (const f::FilterError&) {
    }
    try {
      const std::byte* out = f::decode(stored, pipeline, item, chunk_bytes, scratch, direct.data(), mask);
      if (out != direct.data()) std::abort();
    } catch (const f::FilterError&) {
    }
  }
  return 0;
}
