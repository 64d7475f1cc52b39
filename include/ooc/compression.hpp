#pragma once
/// How a chunked (and possibly compressed) HDF5 or Zarr output is stored: what `--chunks`,
/// `--compression` and `--shuffle` say on the command line, and `chunks=`,
/// `compression=`, `shuffle=` in Python.

#include <cstdint>
#include <string>

namespace ooc {

struct Compression {
  std::int64_t chunk_rows = 0;      // along the first axis (the others are whole); 0: about 1 MiB a chunk
  std::string codec;                // "gzip", "zlib", "zstd" (Zarr), "lz4", "blosc", "none", or "" (not said:
                                    // HDF5 no compressor, Zarr zarr-python's default blosc)
  int level = -1;                   // gzip/zlib 0-9 (HDF5 default 4, as h5py; Zarr 1, as numcodecs),
                                    // zstd (default 1), blosc 0-9 (default 5)
  std::string blosc_codec = "lz4";  // blosclz, lz4, lz4hc, zlib, zstd
  bool shuffle = false;             // HDF5's shuffle filter (blosc: its own shuffle)

  /// Reads "gzip[:LEVEL]", "zlib[:LEVEL]", "zstd[:LEVEL]", "lz4", "blosc[:CODEC[:LEVEL]]"
  /// or "none" into codec, level and blosc_codec; throws ooc::UsageError naming the text.
  void parse_codec(const std::string& text);
};

}  // namespace ooc
