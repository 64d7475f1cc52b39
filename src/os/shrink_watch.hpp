#pragma once
// SIGBUS from a mapped file that shrank under us: the only place in ooc that handles
// signals raised by memory access.
//
// A mapping of a file that another process truncates raises SIGBUS on the first access
// past the new end. A ShrinkWatch over a mapped range turns that into a flag: the
// process-wide handler maps anonymous zero pages over the rest of the range (MAP_FIXED),
// marks the watch, and returns, so the faulting kernel finishes its tile reading zeros.
// The pipeline checks shrank() before it commits anything, and fails the run.

#include "os/layer.hpp"

#include <cstddef>

namespace ooc::os {

class ShrinkWatch {
 public:
  ShrinkWatch() = default;
  /// Watches [address, address + size) of a file mapping; `writable` is the mapping's
  /// protection, which the zero pages get too.
  ShrinkWatch(const void* address, std::size_t size, bool writable);
  ShrinkWatch(ShrinkWatch&& other) noexcept;
  ShrinkWatch& operator=(ShrinkWatch&& other) noexcept;
  ShrinkWatch(const ShrinkWatch&) = delete;
  ShrinkWatch& operator=(const ShrinkWatch&) = delete;
  /// Stops watching; call it (or destroy the watch) before the range is unmapped.
  ~ShrinkWatch();

  /// True once an access to the range faulted because the file behind it shrank; the
  /// range reads as zeros from the faulting page on.
  bool shrank() const;

  /// For another SIGBUS handler installed over this one (os/crash_guard.cpp): handles a
  /// fault at `address` in a watched range as this one would (zeros, flag) and returns
  /// true; false when no watch holds it. Async-signal-safe.
  static bool claim_fault(const void* address);

 private:
  int slot_ = -1;  // index into the handler's table; -1: not watching
};

}  // namespace ooc::os
