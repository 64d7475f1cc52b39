#pragma once
// The pipeline over a stream of unknown length (text import): see src/stream_pipeline.cpp.

#include "ooc/pipeline.hpp"

#include <functional>
#include <memory>

namespace ooc::detail {

/// The same pipeline as run_pipeline, over a stream of unknown length (a text file cut
/// at line ends): read() runs serially and in order and returns the next item's state,
/// or nullptr at the end; kernel(state) runs in parallel; commit(state) runs serially, in
/// read order. At most tokens_in_flight(options) items are alive at once, which bounds
/// memory. options.cancel stops it as it stops run_pipeline (ooc::Cancelled from a commit).
void run_stream_erased(const PipelineOptions& options, const std::function<std::shared_ptr<void>()>& read,
                       const std::function<void(void* state)>& kernel, const std::function<void(void* state)>& commit);

}  // namespace ooc::detail
