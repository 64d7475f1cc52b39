#include "cli/progress.hpp"

#include "ooc/mapped_array.hpp"
#include "ooc/tile_plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace ooc::cli {

namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

}  // namespace

ProgressReporter::ProgressReporter() : tty_(::isatty(STDERR_FILENO) == 1) {}

void ProgressReporter::start(bool enabled, int itemsize) {
  enabled_ = enabled;
  item_ = static_cast<std::uint64_t>(itemsize);
  start_ = std::chrono::steady_clock::now();
  last_ = Progress{};
}

void ProgressReporter::start(bool enabled, const MappedArray& array, const PipelineOptions& options) {
  start(enabled, array.dtype().itemsize());
  const TilePlan plan = TilePlan::for_array(array, options.tile_bytes);
  last_.tiles = plan.size();
  last_.elements = plan.elements();
  last_.tiles_done = std::min(options.first_tile, plan.size());
  last_.elements_done = last_.elements_before =
      last_.tiles_done < plan.size() ? plan[last_.tiles_done].begin : plan.elements();
}

void ProgressReporter::operator()(const Progress& p) {
  last_ = p;
  if (!enabled_ || p.elements == 0) return;
  const int percent = static_cast<int>(100 * p.elements_done / p.elements);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // Speed and time left count only this run's work, not tiles a resumed run skipped.
  const double bytes = static_cast<double>(p.elements_done - p.elements_before) * static_cast<double>(item_);
  const double rate = seconds > 0 ? bytes / seconds : 0;
  const double left = static_cast<double>(p.elements - p.elements_done) * static_cast<double>(item_);
  const std::string eta = rate > 0 ? clock_text(left / rate) : "?";
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r[%s%s] %3d%%  %.2f GB/s  ETA %s ", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), percent, rate / 1e9, eta.c_str());
    line_open_ = true;
    if (p.tiles_done == p.tiles) end_line();
  } else if (percent >= next_percent_ || p.tiles_done == p.tiles) {
    std::fprintf(stderr, "progress: %d%% (%zu/%zu tiles, %.2f GB/s, ETA %s)\n", percent, p.tiles_done, p.tiles,
                 rate / 1e9, eta.c_str());
    next_percent_ = percent / 10 * 10 + 10;
  }
}

void ProgressReporter::end_line() {
  if (line_open_) std::fputc('\n', stderr);
  line_open_ = false;
}

std::string ProgressReporter::done_text() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu of %zu tiles (%.2f MB of %.2f MB)", last_.tiles_done, last_.tiles,
                static_cast<double>(last_.elements_done) * static_cast<double>(item_) / 1e6,
                static_cast<double>(last_.elements) * static_cast<double>(item_) / 1e6);
  return buf;
}

}  // namespace ooc::cli
