#pragma once
/// How a chunked (and possibly compressed) HDF5 output is stored: what `--chunks`,
/// `--compression` and `--shuffle` say on the command line, and `chunks=`,
/// `compression=`, `shuffle=` in Python.

#include <cstdint>
#include <string>

namespace ooc {

struct Compression {
  std::int64_t chunk_rows = 0;      // along the first axis (the others are whole); 0: about 1 MiB a chunk
  std::string codec;                // "gzip", "lz4", "blosc", or "" (no compressor: shuffle alone, or plain chunks)
  int level = -1;                   // gzip 0-9 (default 4, as h5py), blosc 0-9 (default 5)
  std::string blosc_codec = "lz4";  // blosclz, lz4, lz4hc, zlib, zstd
  bool shuffle = false;             // HDF5's shuffle filter (blosc: its own shuffle)

  /// Reads "gzip[:LEVEL]", "lz4", "blosc[:CODEC[:LEVEL]]" into codec, level and
  /// blosc_codec; throws ooc::UsageError naming the text.
  void parse_codec(const std::string& text);
};

}  // namespace ooc
