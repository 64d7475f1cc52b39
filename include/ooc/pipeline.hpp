#pragma once
/// The pipeline: a serial prefetch stage, a parallel kernel stage and a serial, in-order
/// commit stage, run over the tiles of a TilePlan with a bounded number in flight.

#include "ooc/error.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/tile_plan.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace ooc {

struct Progress {
  std::size_t tiles_done = 0;
  std::size_t tiles = 0;
  std::int64_t elements_done = 0;
  std::int64_t elements = 0;
  std::int64_t elements_before = 0;  ///< done before this run started (a resumed run)
};

/// Hooks for a run whose output must survive a crash (ooc::InPlaceJournal is one).
class TileJournal {
 public:
  virtual ~TileJournal() = default;
  /// Kernel stage, on the tile's thread, before its kernel may write anything.
  virtual void before_write(const Tile& tile) = 0;
  /// Commit stage, in tile order, once the tile is committed and nothing behind it can
  /// still fail the run.
  virtual void after_commit(const Tile& tile) = 0;
};

/// How tiles' bytes move between files and kernels.
enum class Io {
  automatic,  ///< inputs mapped unless cold and larger than memory; new outputs direct
  mapped,     ///< memory-mapped, through the page cache
  direct,     ///< O_DIRECT reads and writes into reused aligned buffers (where the
              ///< file system allows; mapped otherwise)
};

struct PipelineOptions {
  int threads = 0;                            ///< 0: every core TBB sees
  Io io = Io::automatic;
  std::uint64_t tile_bytes = kDefaultTileBytes;
  int prefetch = 2;                           ///< tiles whose pages are requested ahead
  int tokens_per_thread = 2;                  ///< tiles in flight per thread
  bool populate = false;                      ///< fill a tile's input page table before its kernel runs
  /// Only these tiles of the array's plan are processed (a reduction then gives the
  /// answer for the elements they cover); MPI runs give each rank its share this way.
  TileRange tiles;
  /// Called from the commit stage after each tile, in tile order.
  std::function<void(const Progress&)> on_progress;
  /// When set (from a signal handler, say), the run stops handing out tiles and throws
  /// ooc::Cancelled from the next commit; outputs are not committed.
  const std::atomic<bool>* cancel = nullptr;
  /// Tiles before this one are already done (a resumed run); they are not run again.
  std::size_t first_tile = 0;
  /// Told before each tile is written and after it is committed.
  TileJournal* journal = nullptr;
};

namespace detail {

/// The arrays a run streams through, and where each tile's bytes are. Mapped arrays:
/// pages of the tiles ahead are requested before the kernels need them, pages behind the
/// commit point are dropped from the resident set, and an output tile's pages are made
/// writable before its kernel runs. Arrays that are not mapped (chunked HDF5) or read and
/// written directly (Io::direct): each tile in flight has its own reused buffer, filled by
/// a read before its kernel runs and, for an output, written in tile order at commit.
class Streams {
 public:
  Streams(const TilePlan& plan, const PipelineOptions& options);
  ~Streams();
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;

  void add_input(const MappedArray& array);
  void add_output(const MappedArray& array);
  /// Serial prefetch stage, before the tile at `position` in the plan goes to a kernel:
  /// page advice for the tiles ahead, and reads that must not run concurrently (HDF5).
  void prefetch(std::size_t position);
  /// Kernel stage, on the thread about to run the tile's kernel: concurrent reads.
  void acquire(const Tile& tile);
  /// The bytes of `array` from element tile.begin on, valid until the tile is committed.
  const std::byte* input(const MappedArray& array, const Tile& tile) const;
  /// Where the kernel writes `array`'s elements from tile.begin on.
  std::byte* output(const MappedArray& array, const Tile& tile) const;
  /// Kernel stage, after the tile's kernel: outputs written by a tile writer encode it.
  void produced(const Tile& tile);
  /// Serial commit stage, before anything of a tile is committed: throws ooc::Error if a
  /// file behind one of the arrays shrank while the tiles so far were read or written.
  void check_intact() const;
  /// Serial commit stage, after the tile at `position` in the plan is merged: direct
  /// writes, page release.
  void release(std::size_t position);
  /// After the last tile: what direct writers still hold.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The thread count a run uses for `requested` (0: every core).
int resolve_threads(int requested);

/// How many tiles a run with these options has in flight at most: tile i + tokens does
/// not start before tile i has left the commit stage.
std::size_t tokens_in_flight(const PipelineOptions& options);

/// Runs fn inside a TBB arena of `threads` threads (allowing more than the cores).
void run_in_arena(int threads, const std::function<void()>& fn);

}  // namespace detail

namespace detail {

/// The pipeline itself, compiled once: kernel(tile) runs in parallel and returns the
/// tile's result (type-erased), commit(tile, result) runs in tile order.
void run_pipeline_erased(const TilePlan& plan, Streams& streams, const PipelineOptions& options,
                         const std::function<std::shared_ptr<void>(const Tile&)>& kernel,
                         const std::function<void(const Tile&, void* result)>& commit);

}  // namespace detail

/// Runs kernel(tile) -> R for every tile of `plan` in parallel and commit(tile, R&&) for
/// each in tile order, on the calling thread's behalf; an exception from either cancels
/// the run and is rethrown here.
template <class Kernel, class Commit>
void run_pipeline(const TilePlan& plan, detail::Streams& streams, const PipelineOptions& options,
                  Kernel&& kernel, Commit&& commit) {
  using Result = std::invoke_result_t<Kernel&, const Tile&>;
  detail::run_pipeline_erased(
      plan, streams, options,
      [&](const Tile& tile) -> std::shared_ptr<void> { return std::make_shared<Result>(kernel(tile)); },
      [&](const Tile& tile, void* result) { commit(tile, std::move(*static_cast<Result*>(result))); });
}

}  // namespace ooc
