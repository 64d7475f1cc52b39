#include "ooc/pipeline.hpp"

#include "mapped_array_access.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>

namespace ooc::detail {

Streams::Streams(const TilePlan& plan, const PipelineOptions& options)
    : plan_(plan), depth_(static_cast<std::size_t>(std::max(0, options.prefetch))),
      populate_(options.populate) {}

void Streams::add_input(const MappedArray& array) { streams_.push_back({&array, false, 0}); }
void Streams::add_output(const MappedArray& array) { streams_.push_back({&array, true, 0}); }

void Streams::prefetch(std::size_t index) {
  const std::size_t horizon = std::min(plan_.size(), index + depth_ + 1);
  for (; advised_ < horizon; ++advised_) {
    const Tile tile = plan_[advised_];
    for (const Stream& s : streams_)
      if (!s.output) MappedArrayAccess::advise(*s.array, tile.begin, tile.end, os::Advice::will_need);
  }
}

void Streams::populate(const Tile& tile) const {
  if (!populate_) return;
  for (const Stream& s : streams_)
    if (!s.output) MappedArrayAccess::advise(*s.array, tile.begin, tile.end, os::Advice::populate_read);
}

void Streams::release(std::size_t index) {
  const Tile tile = plan_[index];
  for (Stream& s : streams_) {
    if (s.output) MappedArrayAccess::start_writeback(*s.array, committed_, tile.end);
    MappedArrayAccess::drop_pages_before(*s.array, tile.end, &s.dropped_to);
  }
  committed_ = tile.end;
}

int resolve_threads(int requested) {
  return requested > 0 ? requested : oneapi::tbb::info::default_concurrency();
}

void run_in_arena(int threads, const std::function<void()>& fn) {
  // The default limit is the core count; a larger explicit request (the determinism
  // sweeps use 7 threads on 2 cores) needs the limit raised for this run.
  std::unique_ptr<oneapi::tbb::global_control> limit;
  if (threads > oneapi::tbb::info::default_concurrency())
    limit = std::make_unique<oneapi::tbb::global_control>(
        oneapi::tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  oneapi::tbb::task_arena arena(threads);
  arena.execute(fn);
}

void run_pipeline_erased(const TilePlan& plan, Streams& streams, const PipelineOptions& options,
                         const std::function<std::shared_ptr<void>(const Tile&)>& kernel,
                         const std::function<void(const Tile&, void* result)>& commit) {
  struct InFlight {
    Tile tile;
    std::shared_ptr<void> result;
  };
  if (plan.empty()) return;
  const int threads = resolve_threads(options.threads);
  const std::size_t tokens =
      static_cast<std::size_t>(threads) * static_cast<std::size_t>(std::max(1, options.tokens_per_thread));
  Progress progress;
  progress.tiles = plan.size();
  progress.elements = plan.elements();
  std::size_t next = 0;
  auto cancelled = [&] { return options.cancel != nullptr && options.cancel->load(); };
  auto throw_cancelled = [&] {
    throw Cancelled("", "cancelled after " + std::to_string(progress.tiles_done) + " of " +
                            std::to_string(plan.size()) + " tiles");
  };

  run_in_arena(threads, [&] {
    namespace tbb = oneapi::tbb;
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, Tile>(tbb::filter_mode::serial_in_order,
                                     [&](tbb::flow_control& control) -> Tile {
                                       if (next == plan.size() || cancelled()) {
                                         control.stop();
                                         return {};
                                       }
                                       streams.prefetch(next);
                                       return plan[next++];
                                     }) &
            tbb::make_filter<Tile, std::shared_ptr<InFlight>>(
                tbb::filter_mode::parallel,
                [&](const Tile& tile) {
                  streams.populate(tile);
                  return std::make_shared<InFlight>(InFlight{tile, kernel(tile)});
                }) &
            tbb::make_filter<std::shared_ptr<InFlight>, void>(
                tbb::filter_mode::serial_in_order, [&](const std::shared_ptr<InFlight>& done) {
                  if (cancelled()) throw_cancelled();
                  commit(done->tile, done->result.get());
                  streams.release(done->tile.index);
                  ++progress.tiles_done;
                  progress.elements_done = done->tile.end;
                  if (options.on_progress) options.on_progress(progress);
                }));
  });
  if (cancelled() && progress.tiles_done < plan.size()) throw_cancelled();
}

}  // namespace ooc::detail
