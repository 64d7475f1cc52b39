#include "core/mapped_array_access.hpp"
#include "ooc/kernel.hpp"
#include "ooc/selection.hpp"
#include "os/tile_reader.hpp"

#include <new>

namespace ooc::detail {

std::byte* scratch(ScratchSlot which, std::size_t bytes, int index) {
  thread_local std::vector<std::vector<std::vector<std::byte>>> buffers;  // [slot][index]
  const auto slot = static_cast<std::size_t>(which);
  if (slot >= buffers.size()) buffers.resize(slot + 1);
  std::vector<std::vector<std::byte>>& numbered = buffers[slot];
  if (static_cast<std::size_t>(index) >= numbered.size()) numbered.resize(static_cast<std::size_t>(index) + 1);
  std::vector<std::byte>& buffer = numbered[static_cast<std::size_t>(index)];
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

void rethrow_naming(const std::string& path) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(path, "out of memory", ErrorKind::out_of_memory);
  } catch (const std::domain_error& e) {  // numpy's ValueError: an empty array's minimum, ...
    throw Error(path, e.what(), ErrorKind::value);
  } catch (const std::exception& e) {
    throw Error(path, e.what());
  }
}

std::exception_ptr current_exception_naming(const std::string& path) {
  try {
    rethrow_naming(path);
  } catch (...) {
    return std::current_exception();
  }
}

TilePlan plan_run(const MappedArray& array, const PipelineOptions& options) {
  const std::uint64_t tile_bytes =
      options.tiles_span_source ? tile_bytes_spanning(array, options.tile_bytes) : options.tile_bytes;
  const TilePlan plan = TilePlan::for_array(array, tile_bytes).slice(options.tiles);
  check_mapped(array, plan);
  return plan;
}

std::uint64_t tile_bytes_writing(const MappedArray& out, int itemsize, std::uint64_t tile_bytes) {
  const TileWriter* writer = MappedArrayAccess::writer(out);
  const std::uint64_t cap = writer != nullptr ? writer->tile_bytes_cap() : 0;
  if (cap == 0) return tile_bytes;
  const std::uint64_t elements = std::max<std::uint64_t>(1, cap / static_cast<std::uint64_t>(out.dtype().itemsize()));
  return std::min(tile_bytes, elements * static_cast<std::uint64_t>(itemsize));
}

TilePlan plan_run(const MappedArray& array, const PipelineOptions& options, const MappedArray& out) {
  PipelineOptions capped = options;
  capped.tile_bytes = tile_bytes_writing(out, array.dtype().itemsize(), options.tile_bytes);
  return plan_run(array, capped);
}

void check_mapped(const MappedArray& array, const TilePlan& plan) {
  const ElementRange mapped = array.window();
  if (plan.empty() || (mapped.begin <= plan.begin() && plan.end() <= mapped.end)) return;
  throw UsageError(array.path(), "maps elements [" + std::to_string(mapped.begin) + ", " +
                                     std::to_string(mapped.end) + ") but the run needs [" +
                                     std::to_string(plan.begin()) + ", " + std::to_string(plan.end()) + ")");
}

void check_transform_arrays(const MappedArray& in, MappedArray& out) {
  if (!out.writable()) throw UsageError(out.path(), "output is mapped read-only");
  if (in.shape() != out.shape())
    throw UsageError(out.path(), "output shape " + shape_repr(out.shape()) + " differs from input shape " +
                                     shape_repr(in.shape()));
  if (in.order() != out.order() && in.ndim() > 1)
    throw UsageError(out.path(), "output memory order differs from the input's");
}

void check_same_layout(const MappedArray& first, const MappedArray& other) {
  if (other.shape() != first.shape())
    throw UsageError(other.path(), "shape " + shape_repr(other.shape()) + " differs from " + first.path() + "'s " +
                                       shape_repr(first.shape()) + " (kernels over several inputs do not broadcast)");
  if (other.order() != first.order() && first.ndim() > 1)
    throw UsageError(other.path(), "memory order differs from " + first.path() + "'s");
}

}  // namespace ooc::detail
