#include "ooc/kernel.hpp"

#include <new>

namespace ooc::detail {

std::byte* scratch(int slot, std::size_t bytes) {
  thread_local std::vector<std::byte> buffers[4];
  std::vector<std::byte>& buffer = buffers[slot];
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

void rethrow_naming(const std::string& path) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(path, "out of memory");
  } catch (const std::exception& e) {
    throw Error(path, e.what());
  }
}

void check_transform_arrays(const MappedArray& in, MappedArray& out) {
  if (!out.writable()) throw UsageError(out.path(), "output is mapped read-only");
  if (in.shape() != out.shape())
    throw UsageError(out.path(), "output shape " + shape_repr(out.shape()) + " differs from input shape " +
                                     shape_repr(in.shape()));
  if (in.order() != out.order() && in.ndim() > 1)
    throw UsageError(out.path(), "output memory order differs from the input's");
}

}  // namespace ooc::detail
