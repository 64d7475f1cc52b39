#include "ooc/pipeline.hpp"

#include "mapped_array_access.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <algorithm>

namespace ooc::detail {

Streams::Streams(const TilePlan& plan, const PipelineOptions& options)
    : plan_(plan), depth_(static_cast<std::size_t>(std::max(0, options.prefetch))),
      populate_(options.populate), committed_(plan.begin()) {}

void Streams::add_input(const MappedArray& array) { streams_.push_back({&array, false, 0}); }
void Streams::add_output(const MappedArray& array) { streams_.push_back({&array, true, 0}); }

void Streams::prefetch(std::size_t position) {
  const std::size_t horizon = std::min(plan_.size(), position + depth_ + 1);
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

void Streams::release(std::size_t position) {
  const Tile tile = plan_[position];
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

}  // namespace ooc::detail
