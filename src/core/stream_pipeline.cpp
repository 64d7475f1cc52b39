// The pipeline over a stream of unknown length: run_ordered (src/pipeline.cpp), the
// core run_pipeline_erased runs tiles of a plan through, fed by read() until it returns
// nothing.

#include "core/stream_pipeline.hpp"

#include <vector>

namespace ooc::detail {

void run_stream_erased(const PipelineOptions& options, const std::function<std::shared_ptr<void>()>& read,
                       const std::function<void(void* state)>& kernel, const std::function<void(void* state)>& commit) {
  const std::size_t tokens = tokens_in_flight(options);
  // An item's state waits in slot seq % tokens (run_ordered: item seq + tokens is read only
  // after item seq has left the commit stage).
  std::vector<std::shared_ptr<void>> slots(tokens);
  std::size_t committed = 0;
  bool done = false;
  auto cancelled = [&] { return options.cancel != nullptr && options.cancel->load(); };
  auto throw_cancelled = [&] {
    throw Cancelled("", "cancelled after " + std::to_string(committed) + " chunks");
  };
  run_ordered(
      options,
      [&](std::size_t seq) {
        std::shared_ptr<void> state = read();
        if (!state) {
          done = true;
          return false;
        }
        slots[seq % tokens] = std::move(state);
        return true;
      },
      [&](std::size_t seq) { kernel(slots[seq % tokens].get()); },
      [&](std::size_t seq) {
        if (cancelled()) throw_cancelled();
        std::shared_ptr<void>& state = slots[seq % tokens];
        commit(state.get());
        state.reset();
        ++committed;
      });
  if (cancelled() && !done) throw_cancelled();
}

}  // namespace ooc::detail
