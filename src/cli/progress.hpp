#pragma once
// oocrun --progress: how far a run has got, on stderr.

#include "ooc/pipeline.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace ooc::cli {

/// Progress on stderr: on a terminal a bar redrawn in place with the percentage, the
/// speed and the time left; otherwise a plain line every 10%. It also remembers how far
/// the run got, for the line printed when a run is interrupted (done_text()), whether
/// or not it prints anything.
class ProgressReporter {
 public:
  ProgressReporter();

  /// Before a run of items of `itemsize` bytes whose plan the first report tells.
  void start(bool enabled, int itemsize);
  /// Before a run over `array` with `options` (tile size and first tile settled).
  void start(bool enabled, const MappedArray& array, const PipelineOptions& options);

  /// PipelineOptions::on_progress calls this (through std::ref) after each tile.
  void operator()(const Progress& p);

  /// Ends a bar left open on the terminal, so that the next line starts on its own.
  void end_line();

  /// "12 of 256 tiles (12.58 MB of 268.44 MB)": how far the run got.
  std::string done_text() const;

 private:
  bool tty_;
  bool enabled_ = false;
  std::uint64_t item_ = 1;
  std::chrono::steady_clock::time_point start_;
  int next_percent_ = 10;
  bool line_open_ = false;
  Progress last_;
};

}  // namespace ooc::cli
