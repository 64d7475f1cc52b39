#pragma once
// Ctrl-C, SIGTERM and SIGHUP cancel oocrun's run rather than kill it.

#include <atomic>

namespace ooc::cli {

/// The one thread that receives SIGINT, SIGTERM and SIGHUP. The first such signal sets
/// cancel_flag(), which PipelineOptions::cancel points at: the pipeline stops at the next
/// tile, an uncommitted output's temporary file is removed, and oocrun exits 128 + that
/// signal. Every further signal, however soon, only asks again: exiting at once would
/// leave the temporary behind (or, in place, a journal where the run had written
/// nothing, or an HDF5 file mid-update), and the cancel takes effect within a tile.
class SignalWatch {
 public:
  /// Blocks the three signals in the calling thread (and so in every thread it starts
  /// later: call it before TBB or MPI start theirs) and starts the watching thread.
  /// The watch lives as long as the process; a second call returns the same one.
  static SignalWatch& start();

  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  const std::atomic<bool>* cancel_flag() const { return &cancel_; }
  bool cancelled() const { return cancel_.load(); }
  /// The first signal received, or 0.
  int signal() const { return signal_.load(); }
  /// "SIGINT", "SIGTERM" or "SIGHUP": the first signal's name.
  const char* signal_name() const;

 private:
  SignalWatch() = default;

  std::atomic<bool> cancel_{false};
  std::atomic<int> signal_{0};
};

}  // namespace ooc::cli
