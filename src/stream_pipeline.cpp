// The pipeline over a stream of unknown length: serial read, parallel kernel, serial
// in-order commit, as run_pipeline_erased runs tiles of a plan (src/pipeline.cpp).

#include "stream_pipeline.hpp"

#include <oneapi/tbb/parallel_pipeline.h>

#include <vector>

namespace ooc::detail {

void run_stream_erased(const PipelineOptions& options, const std::function<std::shared_ptr<void>()>& read,
                       const std::function<void(void* state)>& kernel, const std::function<void(void* state)>& commit) {
  const int threads = resolve_threads(options.threads);
  const std::size_t tokens = tokens_in_flight(options);
  // Only sequence numbers travel between the stages (TBB drops larger tokens unfreed when
  // a run is cancelled); an item's state waits in slot seq % tokens: item seq + tokens
  // is read only after item seq has left the commit stage.
  std::vector<std::shared_ptr<void>> slots(tokens);
  std::size_t next = 0, committed = 0;
  bool done = false;
  auto cancelled = [&] { return options.cancel != nullptr && options.cancel->load(); };
  auto throw_cancelled = [&] {
    throw Cancelled("", "cancelled after " + std::to_string(committed) + " chunks");
  };
  run_in_arena(threads, [&] {
    namespace tbb = oneapi::tbb;
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, std::size_t>(tbb::filter_mode::serial_in_order,
                                            [&](tbb::flow_control& control) -> std::size_t {
                                              if (done || cancelled()) {
                                                control.stop();
                                                return 0;
                                              }
                                              std::shared_ptr<void> state = read();
                                              if (!state) {
                                                done = true;
                                                control.stop();
                                                return 0;
                                              }
                                              slots[next % tokens] = std::move(state);
                                              return next++;
                                            }) &
            tbb::make_filter<std::size_t, std::size_t>(tbb::filter_mode::parallel,
                                                       [&](std::size_t seq) {
                                                         kernel(slots[seq % tokens].get());
                                                         return seq;
                                                       }) &
            tbb::make_filter<std::size_t, void>(tbb::filter_mode::serial_in_order, [&](std::size_t seq) {
              if (cancelled()) throw_cancelled();
              std::shared_ptr<void>& state = slots[seq % tokens];
              commit(state.get());
              state.reset();
              ++committed;
            }));
  });
  if (cancelled() && !done) throw_cancelled();
}

}  // namespace ooc::detail
