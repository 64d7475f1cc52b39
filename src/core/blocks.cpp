// ooc::for_each_block and ooc::read: the pipeline's streams driven by a caller's own
// code (the Python module's reads and map_blocks).

#include "core/layer.hpp"

#include "ooc/blocks.hpp"
#include "ooc/error.hpp"
#include "ooc/internal/kernel.hpp"
#include "ooc/internal/pipeline.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace ooc {

void for_each_block_erased(std::span<const MappedArray* const> inputs, MappedArray* output, const TilePlan& plan,
                           const PipelineOptions& options,
                           const std::function<std::shared_ptr<void>(const Block&)>& fn,
                           const std::function<void(const Tile&, void* result)>& commit) {
  detail::Streams streams(plan, options);
  for (const MappedArray* input : inputs) {
    detail::check_mapped(*input, plan);
    streams.add_input(*input);
  }
  if (output != nullptr) {
    detail::check_mapped(*output, plan);
    streams.add_output(*output);
  }
  detail::run_pipeline(
      plan, streams, options,
      [&](const Tile& tile) {
        std::vector<const std::byte*> data;
        data.reserve(inputs.size());
        for (const MappedArray* input : inputs) data.push_back(streams.input(*input, tile));
        return fn(Block{tile, data, output != nullptr ? streams.output(*output, tile) : nullptr});
      },
      [&](const Tile& tile, std::shared_ptr<void>&& result) { commit(tile, result.get()); });
}

void read(const MappedArray& array, ElementRange range, std::span<std::byte> into, const PipelineOptions& options) {
  range.end = std::min(range.end, array.size());
  if (range.begin < 0 || range.begin > range.end)
    throw UsageError(array.path(), "read: elements " + std::to_string(range.begin) + ":" + std::to_string(range.end) +
                                       " are outside the array's " + std::to_string(array.size()));
  const std::size_t item = static_cast<std::size_t>(array.dtype().itemsize());
  if (into.size() != static_cast<std::size_t>(range.size()) * item)
    throw UsageError(array.path(), "read: a buffer of " + std::to_string(into.size()) + " bytes for " +
                                       std::to_string(range.size()) + " elements of " +
                                       std::to_string(item) + " bytes");
  if (range.size() == 0) return;
  // The array's own plan, cut to the tiles that hold the range: its tiles are the ones
  // every other run reads (whole chunks, whole blocks).
  const TilePlan whole = detail::plan_run(array, options);
  const auto tile_of = [&](std::int64_t element) {
    return static_cast<std::size_t>(element / std::max<std::int64_t>(whole.tile_elements(), 1));
  };
  const TilePlan plan = whole.slice(TileRange{tile_of(range.begin), tile_of(range.end - 1) + 1});
  const MappedArray* inputs[] = {&array};
  struct Done {};
  for_each_block(
      inputs, nullptr, plan, options,
      [&](const Block& block) {
        const std::int64_t begin = std::max(block.tile.begin, range.begin);
        const std::int64_t end = std::min(block.tile.end, range.end);
        if (begin < end)
          std::memcpy(into.data() + static_cast<std::size_t>(begin - range.begin) * item,
                      block.inputs[0] + static_cast<std::size_t>(begin - block.tile.begin) * item,
                      static_cast<std::size_t>(end - begin) * item);
        return Done{};
      },
      [](const Tile&, Done&&) {});
}

}  // namespace ooc
