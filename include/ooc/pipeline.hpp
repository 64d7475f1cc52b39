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
#include <utility>
#include <vector>

namespace ooc {

struct Progress {
  std::size_t tiles_done = 0;
  std::size_t tiles = 0;
  std::int64_t elements_done = 0;
  std::int64_t elements = 0;
};

struct PipelineOptions {
  int threads = 0;                            ///< 0: every core TBB sees
  std::uint64_t tile_bytes = kDefaultTileBytes;
  int prefetch = 2;                           ///< tiles whose pages are requested ahead
  int tokens_per_thread = 2;                  ///< tiles in flight per thread
  bool populate = false;                      ///< fill a tile's input page table before its kernel runs
  /// Called from the commit stage after each tile, in tile order.
  std::function<void(const Progress&)> on_progress;
  /// When set (from a signal handler, say), the run stops handing out tiles and throws
  /// ooc::Cancelled from the next commit; outputs are not committed.
  const std::atomic<bool>* cancel = nullptr;
};

namespace detail {

/// Page management for the arrays a run streams through: pages of the tiles ahead are
/// requested before the kernels need them, pages behind the commit point are dropped
/// from the resident set, and finished output is handed to write-back early.
class Streams {
 public:
  Streams(const TilePlan& plan, const PipelineOptions& options);
  void add_input(const MappedArray& array);
  void add_output(const MappedArray& array);
  /// Serial prefetch stage, before tile `index` goes to a kernel.
  void prefetch(std::size_t index);
  /// Kernel stage, on the thread about to process the tile: maps its input pages in one
  /// call rather than a page fault per few pages.
  void populate(const Tile& tile) const;
  /// Serial commit stage, after tile `index` is merged.
  void release(std::size_t index);

 private:
  struct Stream {
    const MappedArray* array;
    bool output;
    std::uintptr_t dropped_to = 0;  // pages below this address are no longer resident
  };
  const TilePlan& plan_;
  std::size_t depth_;
  bool populate_;
  std::vector<Stream> streams_;
  std::size_t advised_ = 0;       // tiles [0, advised_) have been requested
  std::int64_t committed_ = 0;    // elements [0, committed_) are finished
};

/// The thread count a run uses for `requested` (0: every core).
int resolve_threads(int requested);

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
