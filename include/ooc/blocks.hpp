#pragma once
/// Streaming arrays through your own code, tile by tile, when no kernel class fits:
/// ooc::read copies elements into memory, ooc::for_each_block hands over each tile's raw
/// bytes of several arrays (and of an output written alongside) and commits results in
/// tile order. Both run the pipeline every kernel runs on: selections, chunked and
/// compressed HDF5, direct I/O, page advice ahead and release behind.

#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/tile_plan.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

namespace ooc {

/// One tile of a for_each_block run.
struct Block {
  Tile tile;  ///< elements [tile.begin, tile.end) in memory order
  /// Each input's bytes of the tile, in its dtype, byte order and memory order; valid
  /// until the tile is committed.
  std::span<const std::byte* const> inputs;
  /// Where the output's bytes of the tile go (nullptr for a run without an output).
  std::byte* output = nullptr;
};

/// The run under for_each_block, compiled once: fn(block) runs in parallel and returns
/// the tile's result (type-erased), commit(tile, result) runs in tile order.
void for_each_block_erased(std::span<const MappedArray* const> inputs, MappedArray* output, const TilePlan& plan,
                           const PipelineOptions& options,
                           const std::function<std::shared_ptr<void>(const Block&)>& fn,
                           const std::function<void(const Tile&, void* result)>& commit);

/// Streams the tiles of `plan` over `inputs` (and `output`, cut by the same plan, when
/// not null): fn(const Block&) -> R runs on every core, commit(const Tile&, R&&) runs on
/// one thread in tile order. Every array must cover the plan's elements. An exception
/// from either cancels the run and is rethrown here; options.cancel stops it with
/// ooc::Cancelled. The output is not committed: call output->commit() after.
template <class Fn, class Commit>
void for_each_block(std::span<const MappedArray* const> inputs, MappedArray* output, const TilePlan& plan,
                    const PipelineOptions& options, Fn&& fn, Commit&& commit) {
  using Result = std::invoke_result_t<Fn&, const Block&>;
  for_each_block_erased(
      inputs, output, plan, options,
      [&](const Block& block) -> std::shared_ptr<void> { return std::make_shared<Result>(fn(block)); },
      [&](const Tile& tile, void* result) { commit(tile, std::move(*static_cast<Result*>(result))); });
}

/// Copies elements [range.begin, range.end) of `array`, in memory order, into `into`
/// (range.size() * itemsize bytes), in the array's dtype and byte order, tile by tile
/// on every core. Throws UsageError for a range outside the array or a buffer of
/// another size.
void read(const MappedArray& array, ElementRange range, std::span<std::byte> into,
          const PipelineOptions& options = {});

}  // namespace ooc
