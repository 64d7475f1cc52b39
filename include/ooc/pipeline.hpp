#pragma once
/// How a run goes: the options every ooc::transform, ooc::reduce and oocrun command
/// takes (threads, tile size, I/O, progress, cancellation, journal). The run itself is a
/// serial prefetch stage, a parallel kernel stage and a serial, in-order commit stage over
/// the tiles of a TilePlan, with a bounded number in flight (its machinery is internal:
/// ooc/internal/pipeline.hpp).

#include "ooc/tile_plan.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ooc {

struct Progress {
  std::size_t tiles_done = 0;
  std::size_t tiles = 0;
  std::int64_t elements_done = 0;
  std::int64_t elements = 0;
  std::int64_t elements_before = 0;  ///< done before this run started (a resumed run)
};

/// Hooks for a run whose output must survive a crash (ooc::InPlaceJournal is one).
class TileJournal {
 public:
  virtual ~TileJournal() = default;
  /// Kernel stage, on the tile's thread, before its kernel may write anything.
  virtual void before_write(const Tile& tile) = 0;
  /// Commit stage, in tile order, once the tile is committed and nothing behind it can
  /// still fail the run.
  virtual void after_commit(const Tile& tile) = 0;
};

/// How tiles' bytes move between files and kernels.
enum class Io {
  automatic,  ///< inputs mapped unless cold and larger than memory; new outputs direct
  mapped,     ///< memory-mapped, through the page cache
  direct,     ///< O_DIRECT reads and writes into reused aligned buffers (where the
              ///< file system allows; mapped otherwise)
};

struct PipelineOptions {
  int threads = 0;                            ///< 0: every core TBB sees
  Io io = Io::automatic;
  std::uint64_t tile_bytes = kDefaultTileBytes;
  /// For a selection (a stride, an index list or a mask over a source), whether tile_bytes
  /// counts the source bytes a tile spans (ooc::tile_bytes_spanning), so that resident
  /// memory is bounded by the tile size however sparse the selection, or the selection's
  /// own bytes: false for a caller that has sized the tiles already (oocrun, Python).
  bool tiles_span_source = true;
  int prefetch = 2;                           ///< tiles whose pages are requested ahead
  int tokens_per_thread = 2;                  ///< tiles in flight per thread
  bool populate = false;                      ///< fill a tile's input page table before its kernel runs
  /// Only these tiles of the array's plan are processed (a reduction then gives the
  /// answer for the elements they cover); MPI runs give each rank its share this way.
  TileRange tiles;
  /// Called from the commit stage after each tile, in tile order.
  std::function<void(const Progress&)> on_progress;
  /// When set (from a signal handler, say), the run stops handing out tiles and throws
  /// ooc::Cancelled from the next commit; outputs are not committed.
  const std::atomic<bool>* cancel = nullptr;
  /// Tiles before this one are already done (a resumed run); they are not run again.
  std::size_t first_tile = 0;
  /// Told before each tile is written and after it is committed.
  TileJournal* journal = nullptr;
};

/// Parses a byte count: "4096", "64K", "64M", "1G", "2T" (binary multiples, upper or lower
/// case; an optional trailing "B" or "iB": "64MB", "64MiB"). Throws UsageError ("'12Q' is
/// not a size (try 64M or 1G)", "size '99999999999T' is too large"), with no option named:
/// the caller says which option the text came from.
std::uint64_t parse_size(std::string_view text);

/// A run's options as a caller states them in words: oocrun's --threads, --tile-bytes,
/// --io and --prefetch, the Python module's threads=, tile_bytes=, io= and prefetch=. The
/// same text means the same run in both.
struct RunOptions {
  int threads = 0;                ///< 0: every core TBB sees
  std::string tile_bytes = "16M";  ///< what parse_size reads; 0 is refused
  std::string io = "auto";        ///< "auto", "mmap" or "direct" (Io)
  int prefetch = 2;               ///< tiles whose pages are requested ahead

  /// The PipelineOptions these ask for (the fields not named above as defaulted). Throws
  /// UsageError naming the option at fault, in these fields' names (Error::option():
  /// "tile_bytes: '12Q' is not a size (try 64M or 1G)", "io must be 'auto', 'mmap' or
  /// 'direct', not 'fast'").
  PipelineOptions pipeline_options() const;
};

}  // namespace ooc
