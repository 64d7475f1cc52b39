#pragma once
// The pipeline over a stream of unknown length (text import): see src/core/stream_pipeline.cpp.

#include "core/layer.hpp"

#include "ooc/internal/pipeline.hpp"

#include <functional>
#include <memory>

namespace ooc::detail {

/// The one pipeline both run on (src/pipeline.cpp): source(seq) runs serially, in order,
/// for seq = 0, 1, ... and returns false at the end; kernel(seq) runs in parallel;
/// commit(seq) runs serially in seq order. At most tokens_in_flight(options) items are
/// between source and the end of commit, so a caller's state for item seq can wait in
/// slot seq % tokens. It stops handing out items once options.cancel is set; the callers
/// say so (Cancelled) from their commit and after the run.
void run_ordered(const PipelineOptions& options, const std::function<bool(std::size_t seq)>& source,
                 const std::function<void(std::size_t seq)>& kernel,
                 const std::function<void(std::size_t seq)>& commit);

/// The same pipeline as run_pipeline, over a stream of unknown length (a text file cut
/// at line ends): read() runs serially and in order and returns the next item's state,
/// or nullptr at the end; kernel(state) runs in parallel; commit(state) runs serially, in
/// read order. At most tokens_in_flight(options) items are alive at once, which bounds
/// memory. options.cancel stops it as it stops run_pipeline (ooc::Cancelled from a commit).
void run_stream_erased(const PipelineOptions& options, const std::function<std::shared_ptr<void>()>& read,
                       const std::function<void(void* state)>& kernel, const std::function<void(void* state)>& commit);

}  // namespace ooc::detail
