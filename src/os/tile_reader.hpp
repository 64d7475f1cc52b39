#pragma once
// How the pipeline gets the bytes of an array it does not read through a mapping (a
// chunked HDF5 dataset, or a file read with O_DIRECT): a reader fills a buffer with any
// run of elements.

#include "os/layer.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace ooc::detail {

/// A grow-only buffer aligned for O_DIRECT (4 KiB); its memory is reused tile after tile,
/// which also spares the cost of fresh pages.
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 4096;
  std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  void ensure(std::size_t bytes) {
    if (bytes <= size_) return;
    const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    data_.reset(static_cast<std::byte*>(p));
    size_ = rounded;
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t size_ = 0;
};

/// What a staged reader's fetch() gathered for one tile (raw, still compressed chunks),
/// for its decode(); each reader keeps its own kind. Reused tile after tile.
struct Fetched {
  virtual ~Fetched() = default;
};

class TileReader {
 public:
  virtual ~TileReader() = default;
  /// Reads elements [begin, end) (memory order, the array's own byte order) into
  /// `buffer`, growing it as needed; returns where element `begin` is in it.
  virtual const std::byte* read(std::int64_t begin, std::int64_t end, AlignedBuffer& buffer) = 0;
  /// True if reads may run on several threads at once (on the kernel threads); false
  /// for readers that must be called from the serial prefetch stage.
  virtual bool concurrent() const = 0;
  /// True for a reader whose reads split in two: fetch() in the serial prefetch stage
  /// (what must run one call at a time: raw chunk reads through HDF5), then decode() on
  /// a kernel thread, concurrently with other tiles' (decompression). The pipeline calls
  /// these instead of read(); read() still works, as fetch() then decode().
  virtual bool staged() const { return false; }
  /// Serial: gathers what decode(begin, end, ...) needs into `reuse` (made anew when
  /// null) and returns it. It may also read the tile into `buffer` itself.
  virtual std::unique_ptr<Fetched> fetch(std::int64_t /*begin*/, std::int64_t /*end*/, std::unique_ptr<Fetched> reuse,
                                         AlignedBuffer& /*buffer*/) {
    return reuse;
  }
  /// Concurrent: turns what fetch() gathered into elements [begin, end) in `buffer`, as
  /// read() would; returns where element `begin` is.
  virtual const std::byte* decode(std::int64_t begin, std::int64_t end, Fetched& /*fetched*/, AlignedBuffer& buffer) {
    return read(begin, end, buffer);
  }
  /// The largest tile worth reading in bytes, or 0 for no limit: a reader that decodes
  /// chunks (compressed HDF5) asks for tiles of a few MiB, so that the kernel reads a tile
  /// while it is still in the cache that decoding it filled.
  virtual std::uint64_t tile_bytes_cap() const { return 0; }
  /// Called from the prefetch stage a few tiles ahead of read(begin, end): a reader
  /// that reads through a mapping can advise the pages it will touch.
  virtual void will_need(std::int64_t /*begin*/, std::int64_t /*end*/) {}
  /// Called from the commit stage once elements [begin, end) are done with: a reader
  /// that reads through a mapping lets go of the pages only they needed, so that memory
  /// stays bounded by the tiles in flight, as for a mapped array.
  virtual void release(std::int64_t /*begin*/, std::int64_t /*end*/) {}
  /// True once a read found the file shorter than the reader's mapping of it (another
  /// process truncated it; see os::ShrinkWatch): what was read since is zeros, and the
  /// pipeline fails the run before it commits anything.
  virtual bool shrank() const { return false; }
};

/// How the pipeline writes an output it does not write through a mapping or O_DIRECT (a
/// chunked, compressed HDF5 dataset): the kernel writes each tile into a buffer, encode()
/// compresses what it can of it on the kernel thread, write() stores it in tile order in
/// the serial commit stage.
/// What a writer that compresses whole chunks asks a tile to hold at most: 2 MiB, or one
/// chunk where a chunk is larger. Measured (issue 31, 2 cores, blosc:zstd:1 + shuffle,
/// 1 MiB chunks, 128 MB of float64 cast to float32): 0.19 s with 2 MiB tiles of output
/// against 0.27-0.34 s with 8 MiB (16 MiB of input), whose compressed buffers in flight
/// were fresh pages each (19k page faults against 5.6k) and whose chunks had left the cache.
inline std::uint64_t output_tile_cap(std::uint64_t chunk_bytes) {
  return std::max<std::uint64_t>(std::uint64_t{1} << 20, chunk_bytes);
}

class TileWriter {
 public:
  virtual ~TileWriter() = default;
  /// Concurrent, after the kernel wrote elements [begin, end) to `tile`: the work that
  /// may run on any thread (compressing the chunks the tile holds whole).
  virtual std::unique_ptr<Fetched> encode(std::int64_t begin, std::int64_t end, const std::byte* tile,
                                          std::unique_ptr<Fetched> reuse) = 0;
  /// Serial, in tile order: stores what encode() made, and the chunks tile boundaries cut.
  virtual void write(std::int64_t begin, std::int64_t end, const std::byte* tile, Fetched* encoded) = 0;
  /// After the last tile: everything on its way to the file (not yet fsynced).
  virtual void finish() = 0;
  /// The most bytes of output a tile should hold (0: no limit). A writer that compresses
  /// a tile's chunks right after its kernel asks for tiles of a few chunks: they are still
  /// in the cache the kernel filled, and few compressed buffers are in flight.
  virtual std::uint64_t tile_bytes_cap() const { return 0; }
};

}  // namespace ooc::detail
