#pragma once
/// INTERNAL: not part of ooc's API, and may change in any release. Installed only
/// because the templates of <ooc/kernel.hpp> (ooc::transform, ooc::reduce, ...) expand
/// in the user's code and need it. Users write kernels and call those templates; they
/// do not drive the pipeline themselves.
///
/// The pipeline under them: a serial prefetch stage, a parallel kernel stage and a
/// serial, in-order commit stage over the tiles of a TilePlan, and the streams that say
/// where each tile's bytes are.

#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/tile_plan.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace ooc {

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

/// The pipeline itself, compiled once: kernel(tile) runs in parallel and returns the
/// tile's result (type-erased), commit(tile, result) runs in tile order.
void run_pipeline_erased(const TilePlan& plan, Streams& streams, const PipelineOptions& options,
                         const std::function<std::shared_ptr<void>(const Tile&)>& kernel,
                         const std::function<void(const Tile&, void* result)>& commit);

/// Runs kernel(tile) -> R for every tile of `plan` in parallel and commit(tile, R&&) for
/// each in tile order, on the calling thread's behalf; an exception from either cancels
/// the run and is rethrown here.
template <class Kernel, class Commit>
void run_pipeline(const TilePlan& plan, Streams& streams, const PipelineOptions& options,
                  Kernel&& kernel, Commit&& commit) {
  using Result = std::invoke_result_t<Kernel&, const Tile&>;
  run_pipeline_erased(
      plan, streams, options,
      [&](const Tile& tile) -> std::shared_ptr<void> { return std::make_shared<Result>(kernel(tile)); },
      [&](const Tile& tile, void* result) { commit(tile, std::move(*static_cast<Result*>(result))); });
}

}  // namespace detail

}  // namespace ooc
