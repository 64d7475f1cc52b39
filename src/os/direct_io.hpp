#pragma once
// O_DIRECT reads and writes of an array's byte range, bypassing the page cache: reads
// of cold files larger than memory, and writes of new outputs (a fresh page-cache page
// costs more on these machines than the disk write itself).

#include "os/file.hpp"
#include "tile_reader.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace ooc::os {

/// Opens the file behind `fd` again with O_DIRECT, or nothing where the file system
/// refuses O_DIRECT (tmpfs).
std::optional<UniqueFd> reopen_direct(int fd, bool writable);

/// Reads elements of an array at `data_offset` in a file with O_DIRECT: the aligned
/// blocks covering the run go into the buffer. Safe to call from several threads.
class DirectReader final : public detail::TileReader {
 public:
  DirectReader(UniqueFd fd, std::uint64_t data_offset, int itemsize, std::string path);
  const std::byte* read(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) override;
  bool concurrent() const override { return true; }

 private:
  UniqueFd fd_;
  std::uint64_t data_offset_;
  std::uint64_t item_;
  std::string path_;
};

/// Writes an array's tiles, in tile order, with O_DIRECT. Each tile is computed into an
/// aligned buffer at the offset where its first byte falls within a disk block; the bytes
/// of the block it shares with the tile before (carried over from that tile, or read from
/// the file before the array's first byte) are put in front, whole blocks are written,
/// and the part-block at its end is carried to the next tile. finish() writes the last
/// part-block through the page cache.
class DirectWriter {
 public:
  DirectWriter(UniqueFd direct, int plain_fd, std::uint64_t data_offset, int itemsize, std::string path);
  /// Where element `begin` of a tile goes in `buffer` (grown to hold the tile).
  std::byte* place(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) const;
  /// Writes the tile computed into `buffer` (called in tile order).
  void write(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer);
  /// Writes what is carried after the last tile.
  void finish();

 private:
  UniqueFd direct_;
  int plain_fd_;
  std::uint64_t data_offset_;
  std::uint64_t item_;
  std::string path_;
  detail::AlignedBuffer carry_;
  std::size_t carry_bytes_ = 0;
  std::uint64_t carry_offset_ = 0;  // file offset of carry_[0], block-aligned
};

}  // namespace ooc::os
