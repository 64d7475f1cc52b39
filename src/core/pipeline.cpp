#include "ooc/pipeline.hpp"
#include "ooc/internal/pipeline.hpp"

#include "core/mapped_array_access.hpp"
#include "core/selection_info.hpp"
#include "os/direct_io.hpp"
#include "core/stream_pipeline.hpp"
#include "os/tile_reader.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include "ooc/error.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ooc::detail {

namespace {

// New outputs smaller than this are written through the mapping: O_DIRECT pays off on
// streams, not on a few blocks.
constexpr std::uint64_t kDirectOutputMinBytes = 64ull << 20;

}  // namespace

struct Streams::Impl {
  struct Stream {
    const MappedArray* array;
    bool output;
    std::uintptr_t dropped_to = 0;  // pages below this address are no longer resident
    // Not read through the mapping: the array's own reader (HDF5), or a direct one.
    detail::TileReader* reader = nullptr;
    std::unique_ptr<detail::TileReader> own_reader;
    std::unique_ptr<os::DirectWriter> writer;
    // One buffer per tile in flight: buffer k serves the tile whose index % slots == k.
    // Tile i always commits before tile i + slots enters, so no buffer is ever shared
    // (a direct writer's buffer, once its write is done: written[k] is its ticket).
    std::vector<detail::AlignedBuffer> buffers;
    std::vector<std::uint64_t> written;
    std::vector<const std::byte*> starts;  // where each buffer's tile begins
    // A staged reader's raw bytes for each tile in flight, by slot as the buffers.
    std::vector<std::unique_ptr<detail::Fetched>> fetched;
    // Written by a tile writer (a compressed HDF5 dataset): each slot's encoded tile.
    detail::TileWriter* sink = nullptr;
    std::vector<std::unique_ptr<detail::Fetched>> encoded;
    bool buffered() const { return reader != nullptr || writer != nullptr || sink != nullptr; }
    // The writer's thread may still be writing from the buffers: it stops first.
    ~Stream() { writer.reset(); }
  };

  const TilePlan& plan;
  std::size_t slots;
  std::size_t depth;
  bool populate;
  Io io;
  std::vector<std::unique_ptr<Stream>> streams;
  std::size_t advised = 0;       // tile positions [0, advised) have been requested
  std::int64_t committed;        // elements [plan.begin(), committed) are finished

  Stream& add(const MappedArray& array, bool output) {
    for (auto& s : streams)
      if (s->array == &array) {  // in place: one stream, read and written through the mapping
        s->output = true;
        s->reader = nullptr;
        s->own_reader.reset();
        s->buffers.clear();
        return *s;
      }
    streams.push_back(std::make_unique<Stream>());
    Stream& s = *streams.back();
    s.array = &array;
    s.output = output;
    return s;
  }

  void make_buffers(Stream& s) {
    s.buffers.resize(slots);
    s.starts.assign(slots, nullptr);
    s.written.assign(slots, 0);
    s.fetched.resize(slots);
    s.encoded.resize(slots);
  }

  const Stream& find(const MappedArray& array) const {
    for (const auto& s : streams)
      if (s->array == &array) return *s;
    throw std::logic_error("array is not one of this run's streams");
  }

  bool read_directly(const MappedArray& array) const {
    if (io == Io::mapped || array.nbytes() == 0) return false;
    if (io == Io::direct) return true;
    // Automatic: a cold file larger than this process's memory cannot stay cached anyway,
    // and O_DIRECT reads it about twice as fast as page faults and readahead do.
    return array.nbytes() > os::memory_limit() &&
           MappedArrayAccess::mapping(array)->cached_fraction() < 0.5;
  }
};

Streams::Streams(const TilePlan& plan, const PipelineOptions& options)
    : impl_(new Impl{plan, tokens_in_flight(options), static_cast<std::size_t>(std::max(0, options.prefetch)),
                     options.populate, options.io, {},
                     // A resumed run starts at position first_tile: nothing before it is
                     // advised or released.
                     std::min(options.first_tile, plan.size()),
                     plan.size() > options.first_tile ? plan[options.first_tile].begin : plan.end()}) {}

Streams::~Streams() = default;

void Streams::add_input(const MappedArray& array) {
  Impl::Stream& s = impl_->add(array, false);
  if (!array.mapped()) {
    s.reader = MappedArrayAccess::reader(array);
    // A selection of a mapped file reads that file's spans directly where the file alone
    // would be read so (the cold masked copy read the mapping at 0.46x the disk).
    if (const MappedArray* source = selection_source(s.reader)) {
      std::optional<os::UniqueFd> direct;
      if (impl_->read_directly(*source)) direct = os::reopen_direct(MappedArrayAccess::fd(*source), false);
      read_selection_directly(s.reader, std::move(direct));
    }
  } else if (impl_->read_directly(array)) {
    if (auto fd = os::reopen_direct(MappedArrayAccess::fd(array), false)) {
      s.own_reader = std::make_unique<os::DirectReader>(std::move(*fd), array.info().data_offset,
                                                        array.dtype().itemsize(), array.path());
      s.reader = s.own_reader.get();
    }
  }
  if (s.buffered()) impl_->make_buffers(s);
}

void Streams::add_output(const MappedArray& array) {
  const bool in_place = std::any_of(impl_->streams.begin(), impl_->streams.end(),
                                    [&](const auto& s) { return s->array == &array; });
  Impl::Stream& s = impl_->add(array, true);
  if (detail::TileWriter* sink = MappedArrayAccess::writer(array); sink != nullptr && !array.mapped()) {
    // In place on an array read and written tile by tile (an uncompressed Zarr array's
    // chunk files): the kernel rewrites the tile its reader decoded, and its writer stores it.
    s.reader = MappedArrayAccess::reader(array);
    s.sink = sink;
    impl_->make_buffers(s);
    return;
  }
  if (detail::TileWriter* sink = MappedArrayAccess::writer(array); sink != nullptr && !in_place) {
    s.sink = sink;
    impl_->make_buffers(s);
    return;
  }
  // Only an output this process writes whole: an MPI rank's part shares its edge pages
  // with the neighbours' mappings, and O_DIRECT must not write under a mapped page.
  const bool whole = array.window().size() == array.size();
  const bool direct = !in_place && whole && array.pending() && impl_->io != Io::mapped && array.nbytes() > 0 &&
                      (impl_->io == Io::direct || array.nbytes() >= kDirectOutputMinBytes);
  if (!direct) return;
  if (auto fd = os::reopen_direct(MappedArrayAccess::fd(array), true)) {
    s.writer = std::make_unique<os::DirectWriter>(std::move(*fd), MappedArrayAccess::fd(array),
                                                  array.info().data_offset, array.dtype().itemsize(), array.path());
    impl_->make_buffers(s);
  }
}

const std::byte* Streams::input(const MappedArray& array, const Tile& tile) const {
  const Impl::Stream& s = impl_->find(array);
  if (s.reader) return s.starts[tile.index % impl_->slots];
  // A mapping may hold a window of the array (an MPI rank's share) rather than all of it.
  return array.bytes().data() +
         static_cast<std::size_t>(tile.begin - array.window().begin) * static_cast<std::size_t>(array.dtype().itemsize());
}

std::byte* Streams::output(const MappedArray& array, const Tile& tile) const {
  const Impl::Stream& s = impl_->find(array);
  if (s.writer || s.sink) return const_cast<std::byte*>(s.starts[tile.index % impl_->slots]);
  return MappedArrayAccess::mapping(array)->data() +
         static_cast<std::size_t>(tile.begin - array.window().begin) * static_cast<std::size_t>(array.dtype().itemsize());
}

void Streams::prefetch(std::size_t position) {
  Impl& m = *impl_;
  const Tile tile = m.plan[position];
  const std::size_t slot = tile.index % m.slots;
  for (auto& s : m.streams) {
    if (!s->reader) continue;
    if (s->reader->staged())  // raw reads here, decoding on the kernel threads (acquire)
      s->fetched[slot] = s->reader->fetch(tile.begin, tile.end, std::move(s->fetched[slot]), s->buffers[slot]);
    else if (!s->reader->concurrent())
      s->starts[slot] = s->reader->read(tile.begin, tile.end, s->buffers[slot]);
  }
  const std::size_t horizon = std::min(m.plan.size(), position + m.depth + 1);
  for (; m.advised < horizon; ++m.advised) {
    const Tile ahead = m.plan[m.advised];
    for (auto& s : m.streams)
      if (!s->output && !s->buffered())
        MappedArrayAccess::advise(*s->array, ahead.begin, ahead.end, os::Advice::will_need);
      else if (s->reader)  // an input's, or an in-place stream's
        s->reader->will_need(ahead.begin, ahead.end);
  }
}

void Streams::acquire(const Tile& tile) {
  Impl& m = *impl_;
  const std::size_t slot = tile.index % m.slots;
  for (auto& s : m.streams) {
    if (s->reader && s->reader->staged())
      s->starts[slot] = s->reader->decode(tile.begin, tile.end, *s->fetched[slot], s->buffers[slot]);
    else if (s->reader && s->reader->concurrent())
      s->starts[slot] = s->reader->read(tile.begin, tile.end, s->buffers[slot]);
    if (s->writer) {
      s->writer->wait(s->written[slot]);  // the write of tile index - slots, from this buffer
      s->starts[slot] = s->writer->place(tile.begin, tile.end, s->buffers[slot]);
    }
    if (s->sink && !s->reader) {
      s->buffers[slot].ensure(static_cast<std::size_t>(std::max<std::int64_t>(1, tile.end - tile.begin)) *
                              static_cast<std::size_t>(s->array->dtype().itemsize()));
      s->starts[slot] = s->buffers[slot].data();
    }
    if (m.populate && !s->output && !s->buffered())
      MappedArrayAccess::advise(*s->array, tile.begin, tile.end, os::Advice::populate_read);
    // A mapped output's pages made writable in one call rather than one write fault
    // each: in-place add-one of a warm 2 GiB file 1.0-1.08 s against 1.35-1.65 s.
    if (s->output && !s->buffered())
      MappedArrayAccess::advise(*s->array, tile.begin, tile.end, os::Advice::populate_write);
  }
}

void Streams::produced(const Tile& tile) {
  Impl& m = *impl_;
  const std::size_t slot = tile.index % m.slots;
  for (auto& s : m.streams)
    if (s->sink) s->encoded[slot] = s->sink->encode(tile.begin, tile.end, s->starts[slot], std::move(s->encoded[slot]));
}

void Streams::check_intact() const {
  for (const auto& s : impl_->streams) s->array->check_intact();
}

void Streams::release(std::size_t position) {
  Impl& m = *impl_;
  const Tile tile = m.plan[position];
  for (auto& s : m.streams) {
    if (s->writer) {
      const std::size_t slot = tile.index % m.slots;
      s->written[slot] = s->writer->write(tile.begin, tile.end, s->buffers[slot]);
      continue;
    }
    if (s->sink) {
      const std::size_t slot = tile.index % m.slots;
      s->sink->write(tile.begin, tile.end, s->starts[slot], s->encoded[slot].get());
      if (!s->reader) continue;
    }
    if (s->reader) {
      s->reader->release(tile.begin, tile.end);
      continue;
    }
    MappedArrayAccess::drop_pages_before(*s->array, tile.end, &s->dropped_to);
    // Write-back of a finished output tile starts now rather than at the final msync
    // (measurements in docs/decisions/2026-11-30-write-back-at-commit.md).
    if (s->output) MappedArrayAccess::start_writeback(*s->array, tile.begin, tile.end);
  }
  m.committed = tile.end;
}

void Streams::finish() {
  for (auto& s : impl_->streams) {
    if (s->writer) s->writer->finish();
    if (s->sink) s->sink->finish();
  }
}

int resolve_threads(int requested) {
  return requested > 0 ? requested : oneapi::tbb::info::default_concurrency();
}

std::size_t tokens_in_flight(const PipelineOptions& options) {
  return static_cast<std::size_t>(resolve_threads(options.threads)) *
         static_cast<std::size_t>(std::max(1, options.tokens_per_thread));
}

void run_in_arena(int threads, const std::function<void()>& fn) {
  // The process-wide limit is the core count unless something lowered it; a larger
  // explicit request (the determinism sweeps use 7 threads on 2 cores) needs the limit
  // raised for this run, or the arena gets fewer workers than it asked for.
  namespace tbb = oneapi::tbb;
  std::unique_ptr<tbb::global_control> limit;
  if (static_cast<std::size_t>(threads) > tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism))
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                  static_cast<std::size_t>(threads));
  tbb::task_arena arena(threads);
  arena.execute(fn);
}

void run_ordered(const PipelineOptions& options, const std::function<bool(std::size_t seq)>& source,
                 const std::function<void(std::size_t seq)>& kernel,
                 const std::function<void(std::size_t seq)>& commit) {
  const int threads = resolve_threads(options.threads);
  const std::size_t tokens = tokens_in_flight(options);
  // Only sequence numbers travel between the stages (TBB allocates larger tokens on the
  // heap and drops them, unfreed, when a run is cancelled); the callers keep an item's
  // state in slot seq % tokens: item seq + tokens starts only after item seq has left the
  // commit stage.
  std::size_t next = 0;
  bool done = false;
  run_in_arena(threads, [&] {
    namespace tbb = oneapi::tbb;
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, std::size_t>(tbb::filter_mode::serial_in_order,
                                            [&](tbb::flow_control& control) -> std::size_t {
                                              if (done || (options.cancel != nullptr && options.cancel->load()) ||
                                                  !source(next)) {
                                                done = true;
                                                control.stop();
                                                return 0;
                                              }
                                              return next++;
                                            }) &
            tbb::make_filter<std::size_t, std::size_t>(tbb::filter_mode::parallel,
                                                       [&](std::size_t seq) {
                                                         kernel(seq);
                                                         return seq;
                                                       }) &
            tbb::make_filter<std::size_t, void>(tbb::filter_mode::serial_in_order,
                                                [&](std::size_t seq) { commit(seq); }));
  });
}

void run_pipeline_erased(const TilePlan& plan, Streams& streams, const PipelineOptions& options,
                         const std::function<std::shared_ptr<void>(const Tile&)>& kernel,
                         const std::function<void(const Tile&, void* result)>& commit) {
  if (plan.size() <= options.first_tile) return;
  const std::size_t tokens = tokens_in_flight(options);
  // Item seq is the tile at position first_tile + seq of the plan. A tile's `index` is its
  // number in the whole array's plan, which a part of it (an MPI rank's) does not start at 0.
  const std::size_t first = options.first_tile;
  std::vector<std::shared_ptr<void>> results(tokens);
  Progress progress;
  progress.tiles = plan.size();
  progress.elements = plan.elements();
  progress.tiles_done = first;
  progress.elements_done = progress.elements_before = plan[first].begin - plan.begin();
  auto cancelled = [&] { return options.cancel != nullptr && options.cancel->load(); };
  auto throw_cancelled = [&] {
    throw Cancelled("", "cancelled after " + std::to_string(progress.tiles_done) + " of " +
                            std::to_string(plan.size()) + " tiles");
  };
  run_ordered(
      options,
      [&](std::size_t seq) {
        if (first + seq == plan.size()) return false;
        streams.prefetch(first + seq);
        return true;
      },
      [&](std::size_t seq) {
        const Tile tile = plan[first + seq];
        streams.acquire(tile);
        if (options.journal != nullptr) options.journal->before_write(tile);
        results[seq % tokens] = kernel(tile);
        streams.produced(tile);
      },
      [&](std::size_t seq) {
        const std::size_t position = first + seq;
        const Tile tile = plan[position];
        std::shared_ptr<void>& result = results[seq % tokens];
        if (cancelled()) throw_cancelled();
        streams.check_intact();
        commit(tile, result.get());
        result.reset();
        streams.release(position);
        if (options.journal != nullptr) options.journal->after_commit(tile);
        ++progress.tiles_done;
        progress.elements_done = tile.end - plan.begin();
        if (options.on_progress) options.on_progress(progress);
      });
  if (cancelled() && progress.tiles_done < plan.size()) throw_cancelled();
  streams.finish();
}

}  // namespace ooc::detail

namespace ooc {

std::uint64_t parse_size(std::string_view text) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (~std::uint64_t{0} - digit) / 10) throw UsageError("size '" + std::string(text) + "' is too large");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) throw UsageError("'" + std::string(text) + "' is not a size (try 64M or 1G)");
  std::string_view unit = text.substr(i);
  // A multiplier letter may be followed by "B" or "iB" ("64M", "64MB", "64MiB").
  if (unit.size() > 1 && unit.ends_with("iB")) unit.remove_suffix(2);
  else if (unit.size() > 1 && unit.ends_with("B")) unit.remove_suffix(1);
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "k") shift = 10;
  else if (unit == "M" || unit == "m") shift = 20;
  else if (unit == "G" || unit == "g") shift = 30;
  else if (unit == "T" || unit == "t") shift = 40;
  else throw UsageError("'" + std::string(text) + "' is not a size (try 64M or 1G)");
  if (shift > 0 && value > (~std::uint64_t{0} >> shift)) throw UsageError("size '" + std::string(text) + "' is too large");
  return value << shift;
}

PipelineOptions RunOptions::pipeline_options() const {
  PipelineOptions options;
  if (threads < 0)
    throw UsageError(std::string(), "threads must be 0 (every core) or more, not " + std::to_string(threads), "threads");
  options.threads = threads;
  try {
    options.tile_bytes = parse_size(tile_bytes);
  } catch (const UsageError& e) {
    throw UsageError(std::string(), "tile_bytes: " + e.problem(), "tile_bytes");
  }
  if (options.tile_bytes == 0) throw UsageError(std::string(), "tile_bytes must be positive", "tile_bytes");
  if (io == "auto") options.io = Io::automatic;
  else if (io == "mmap") options.io = Io::mapped;
  else if (io == "direct") options.io = Io::direct;
  else throw UsageError(std::string(), "io must be 'auto', 'mmap' or 'direct', not '" + io + "'", "io");
  if (prefetch < 0) throw UsageError(std::string(), "prefetch must be 0 or more", "prefetch");
  options.prefetch = prefetch;
  return options;
}

}  // namespace ooc
