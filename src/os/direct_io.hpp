#pragma once
// O_DIRECT reads and writes of an array's byte range, bypassing the page cache: reads
// of cold files larger than memory, and writes of new outputs (a fresh page-cache page
// costs more on these machines than the disk write itself).

#include "os/layer.hpp"

#include "os/file.hpp"
#include "os/tile_reader.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

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
///
/// The writes themselves run on a thread of the writer's own, one after another, so that
/// the disk always has the next tile queued while the pipeline's threads compute: a
/// blocking write in the commit stage held one of two cores idle for each tile's write,
/// and the disk idle while the commit waited for the next kernel. A tile's buffer is the
/// writer's until wait() says its write is done.
class DirectWriter {
 public:
  DirectWriter(UniqueFd direct, int plain_fd, std::uint64_t data_offset, int itemsize, std::string path);
  /// Stops the writes not yet started (a run that failed or was cancelled) and waits for
  /// the one under way.
  ~DirectWriter();
  DirectWriter(const DirectWriter&) = delete;
  DirectWriter& operator=(const DirectWriter&) = delete;
  /// Where element `begin` of a tile goes in `buffer` (grown to hold the tile). The
  /// buffer's last write (its ticket) must be done: wait() for it first.
  std::byte* place(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) const;
  /// Queues the write of the tile computed into `buffer` (called in tile order); returns
  /// its ticket.
  std::uint64_t write(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer);
  /// Blocks until the write with this ticket (and every one before it) is done; throws
  /// ooc::Error if a write failed. Ticket 0 is done from the start.
  void wait(std::uint64_t ticket);
  /// Waits for every write, then writes what is carried after the last tile.
  void finish();

 private:
  struct Request {
    const std::byte* data;
    std::uint64_t bytes, offset;
  };
  void run();

  UniqueFd direct_;
  int plain_fd_;
  std::uint64_t data_offset_;
  std::uint64_t item_;
  std::string path_;
  detail::AlignedBuffer carry_;
  std::size_t carry_bytes_ = 0;
  std::uint64_t carry_offset_ = 0;  // file offset of carry_[0], block-aligned

  std::mutex mutex_;
  std::condition_variable queued_, written_;
  std::deque<Request> queue_;
  std::uint64_t issued_ = 0, done_ = 0;  // tickets handed out, writes finished
  std::string error_;                    // the first write's failure
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ooc::os
