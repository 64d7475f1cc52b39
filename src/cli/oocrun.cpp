// oocrun: argument parsing and dispatch, nothing else.

#include "cli/job.hpp"
#include "cli/json.hpp"
#include "cli/options.hpp"
#include "cli/text.hpp"
#include "format/hdf5.hpp"
#include "mapped_array_access.hpp"
#include "ooc/ooc.hpp"

#include <CLI/CLI.hpp>

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
constexpr const char* kJsonHelp =
    "print one JSON object (RFC 8259: NaN, inf, -inf as the strings \"NaN\", \"Infinity\", \"-Infinity\"); "
    "stderr then carries errors only";

// -o FILE.h5:/x --chunks N|auto --compression C --shuffle: a chunked, compressed output.
struct ChunkedOutput {
  std::string chunks;       // "" (not asked), "auto" or a row count
  std::string compression;  // "" or gzip[:LEVEL], lz4, blosc[:CODEC[:LEVEL]]
  bool shuffle = false;
  bool asked() const { return !chunks.empty() || !compression.empty() || shuffle; }
};
ChunkedOutput g_chunked;

struct Common {
  int threads = 0;
  std::string tile_bytes = "16M";
  int prefetch = 2;
  bool progress = false;
  bool quiet = false;
  bool verbose = false;
  bool overwrite = false;
  bool json = false;  // --json: stdout has the one JSON object, stderr only errors (and --progress)
  std::string io_mode = "auto";
};

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// A summary or note on stderr: not with --quiet, nor with --json, whose object carries
// what a reader needs (stderr then holds errors alone, and --progress where asked).
void report(const Common& common, const std::string& line) {
  if (!common.quiet && !common.json) std::cerr << "oocrun: " << line << "\n";
}

// --verbose: how an input is read (a selection's runs, spans and page advice).
void describe_reads(const Common& common, const ooc::MappedArray& array) {
  if (!common.verbose || common.quiet) return;
  const std::string summary = ooc::selection_summary(array);
  if (!summary.empty()) std::cerr << "oocrun: " << summary << "\n";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Progress on stderr: on a terminal a bar redrawn in place with the percentage, the
// speed and the time left; otherwise a plain line every 10%. It also remembers how far
// the run got, for the line printed when a run is interrupted.
class ProgressReporter {
 public:
  ProgressReporter() : tty_(::isatty(STDERR_FILENO) == 1) {}

  /// Before a run of items of `itemsize` bytes whose plan the first report tells.
  void start(bool enabled, int itemsize) {
    enabled_ = enabled;
    item_ = static_cast<std::uint64_t>(itemsize);
    start_ = std::chrono::steady_clock::now();
    last_ = ooc::Progress{};
  }

  /// Before a run over `array` with `options` (tile size and first tile settled).
  void start(bool enabled, const ooc::MappedArray& array, const ooc::PipelineOptions& options) {
    start(enabled, array.dtype().itemsize());
    const ooc::TilePlan plan = ooc::TilePlan::for_array(array, options.tile_bytes);
    last_.tiles = plan.size();
    last_.elements = plan.elements();
    last_.tiles_done = std::min(options.first_tile, plan.size());
    last_.elements_done = last_.elements_before = last_.tiles_done < plan.size() ? plan[last_.tiles_done].begin
                                                                                   : plan.elements();
  }

  void operator()(const ooc::Progress& p) {
    last_ = p;
    if (!enabled_ || p.elements == 0) return;
    const int percent = static_cast<int>(100 * p.elements_done / p.elements);
    const double seconds = seconds_since(start_);
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

  /// Ends a bar left open on the terminal, so that the next line starts on its own.
  void end_line() {
    if (line_open_) std::fputc('\n', stderr);
    line_open_ = false;
  }

  /// "12 of 256 tiles (12.58 MB of 268.44 MB)": how far the run got.
  std::string done_text() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%zu of %zu tiles (%.2f MB of %.2f MB)", last_.tiles_done, last_.tiles,
                  static_cast<double>(last_.elements_done) * static_cast<double>(item_) / 1e6,
                  static_cast<double>(last_.elements) * static_cast<double>(item_) / 1e6);
    return buf;
  }

 private:
  static std::string clock_text(double seconds) {
    const auto s = static_cast<long long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    else std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
    return buf;
  }

  bool tty_;
  bool enabled_ = false;
  std::uint64_t item_ = 1;
  std::chrono::steady_clock::time_point start_;
  int next_percent_ = 10;
  bool line_open_ = false;
  ooc::Progress last_;
};

// Steps not yet split across the ranks of an MPI job are refused there, rather than
// run by every rank at once.
void refuse_across_ranks(const ooc::cli::Job& job, const std::string& what) {
  if (job.spans_ranks()) throw ooc::UsageError("", what + " does not run under MPI yet; run it without mpirun");
}

ProgressReporter g_progress;
// Said after an error line: how to finish an in-place run the error interrupted.
std::string g_resume_note;

// What a cancelled run names in its one line ("OUT: SIGINT: cancelled after ..."), and
// what it says after that ("; no output written", or how to finish an in-place run).
std::string g_subject;
std::string g_cancel_note;

// Ctrl-C, SIGTERM and SIGHUP cancel the run: the pipeline stops at the next tile, an
// uncommitted output's temporary file is removed, and oocrun exits 128 + the first
// signal. Every further signal, however soon, only asks again: exiting at once would
// leave the temporary behind (or, in place, a journal where the run had written
// nothing, or an HDF5 file mid-update), and the cancel takes effect within a tile.
std::atomic<bool> g_cancel{false};
std::atomic<int> g_signal{0};

void start_signal_watch() {
  static sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  // Blocked before TBB starts its threads, so they inherit the mask and only the watcher
  // thread receives these signals.
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([] {
    while (true) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      int none = 0;
      g_signal.compare_exchange_strong(none, sig);  // the first signal names the exit
      g_cancel = true;
    }
  }).detach();
}

// What -o may name (apply, reduce --axis, eval, import): a .npy file or an HDF5 dataset. Anything
// else is refused before anything is opened or created, rather than written as a .npy
// under that name (`-o Z.txt`, `-o -`) or through a link to a device or pipe
// (`-o /dev/stdout`): oocrun writes arrays to files, never to a stream.
void check_output_name(const std::string& out) {
  if (out.size() >= 4 && out.ends_with(".npy")) return;
  if (ooc::hdf5::split(out)) return;
  throw ooc::UsageError(out, "an output is a .npy file (out.npy) or an HDF5 dataset (file.h5:/dataset)");
}

// A signal that came after the last tile still cancels a new output: it is not put in
// place. (Across MPI ranks, commit's agreement is where every rank learns of a cancel.)
void stop_if_cancelled(const ooc::cli::Job& job) {
  if (g_cancel && !job.spans_ranks()) throw ooc::Cancelled("", "cancelled");
}

// A selection's tiles are sized by the bytes of its source they span
// (ooc::tile_bytes_spanning), so that a sparse one is cut into enough tiles for every
// thread. Not across MPI ranks: their shares were cut from the options as given.
void size_tiles_for(const ooc::cli::Job& job, const ooc::MappedArray& a, ooc::PipelineOptions& options) {
  if (!job.spans_ranks()) options.tile_bytes = ooc::tile_bytes_spanning(a, options.tile_bytes);
}

ooc::PipelineOptions pipeline_options(const Common& common) {
  ooc::PipelineOptions options;
  options.cancel = &g_cancel;
  options.threads = common.threads;
  try {
    options.tile_bytes = ooc::cli::parse_size(common.tile_bytes);
  } catch (const std::invalid_argument& e) {
    throw ooc::UsageError("", std::string("--tile-bytes: ") + e.what());
  }
  if (options.tile_bytes == 0) throw ooc::UsageError("", "--tile-bytes must be positive");
  options.prefetch = common.prefetch;
  options.io = common.io_mode == "mmap" ? ooc::Io::mapped : common.io_mode == "direct" ? ooc::Io::direct
                                                                                    : ooc::Io::automatic;
  return options;
}

void shape_json(ooc::cli::Json& j, const ooc::Shape& shape) {
  j.begin_array();
  for (std::int64_t n : shape) j.integer(n);
  j.end_array();
}

// Logical bytes against the bytes stored in the file, for an HDF5 dataset with storage.
std::optional<double> compression_ratio(const ooc::ArrayEntry& e) {
  if (!e.supported || e.stored_bytes == 0) return std::nullopt;
  return static_cast<double>(e.info.nbytes()) / static_cast<double>(e.stored_bytes);
}

void entry_json(ooc::cli::Json& j, const ooc::ArrayEntry& e) {
  const ooc::ArrayInfo& info = e.info;
  j.begin_object().member("path", e.path).member("format", info.format);
  if (!info.format_version.empty()) j.member("format_version", info.format_version);
  if (e.supported) {
    j.member("dtype", info.dtype.descr()).member("dtype_name", info.dtype.name());
  } else {
    j.key("dtype").null().member("type", e.type);
  }
  j.key("shape");
  shape_json(j, info.shape);
  j.member("order", info.order == ooc::Order::c ? "C" : "F").member("fortran_order", info.order == ooc::Order::fortran);
  if (e.supported)
    j.member("itemsize", e.info.dtype.itemsize()).member("size", info.size()).member("nbytes", info.nbytes());
  j.member("data_offset", static_cast<std::uint64_t>(info.data_offset));
  if (info.format == "hdf5") {
    j.member("layout", e.layout).key("filters").begin_array();
    for (const std::string& f : e.filters) j.string(f);
    j.end_array().key("chunks");
    if (e.chunks.empty()) j.null();
    else shape_json(j, e.chunks);
    j.member("stored_bytes", static_cast<std::uint64_t>(e.stored_bytes)).key("compression_ratio");
    if (const auto ratio = compression_ratio(e)) j.number(*ratio);
    else j.null();
    j.member("readable", e.readable).member("mappable", e.mappable);
    j.member("why_not_mappable", e.why_not_mappable);
  }
  j.end_object();
}

std::string entry_text(const ooc::ArrayEntry& e) {
  const ooc::ArrayInfo& info = e.info;
  std::ostringstream out;
  out << e.path << ": ";
  if (info.format == "npy") out << "npy " << info.format_version << ", ";
  out << (e.supported ? info.dtype.name() + " (" + info.dtype.descr() + ")" : e.type) << ", shape "
      << ooc::shape_repr(info.shape);
  if (info.format == "npy") {
    out << ", " << (info.order == ooc::Order::c ? "C" : "F") << " order, " << info.nbytes() << " bytes of data at offset "
        << info.data_offset;
  } else {
    out << ", " << e.layout;
    for (const std::string& f : e.filters) out << "+" << f;
    if (!e.chunks.empty()) out << ", chunks " << ooc::shape_repr(e.chunks);
    if (const auto ratio = compression_ratio(e); ratio && !e.filters.empty()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.2f", *ratio);
      out << ", compression " << text << "x (" << e.stored_bytes << " of " << e.info.nbytes() << " bytes stored)";
    }
    out << (e.mappable ? ", mapped" : e.readable ? ", streamed (" + e.why_not_mappable + ")"
                                                : ", not readable: " + e.why_not_mappable);
  }
  return out.str();
}

int run_info(const std::string& path, bool json) {
  g_subject = path;
  const std::vector<ooc::ArrayEntry> entries = ooc::describe(path);
  const bool whole_hdf5_file = entries.empty() || entries.front().path != path;
  if (json && whole_hdf5_file) {
    ooc::cli::Json j;
    j.begin_object().member("path", path).member("format", "hdf5").key("datasets").begin_array();
    for (const ooc::ArrayEntry& e : entries) entry_json(j, e);
    j.end_array().end_object();
    std::cout << j.text() << "\n";
  } else if (json) {
    ooc::cli::Json j;
    entry_json(j, entries.front());
    std::cout << j.text() << "\n";
  } else {
    if (whole_hdf5_file) std::cout << path << ": HDF5 file, " << entries.size() << " dataset(s)\n";
    for (const ooc::ArrayEntry& e : entries) std::cout << entry_text(e) << "\n";
  }
  return 0;
}

// The output of apply or eval: chunked and compressed when asked, else the job's own.
ooc::MappedArray make_output(const ooc::cli::Job& job, const std::string& path, ooc::DType dtype,
                             const ooc::MappedArray* like, const ooc::Shape& shape, ooc::Order order, bool overwrite) {
  if (!g_chunked.asked())
    return like ? job.create_output(path, dtype, *like, overwrite) : ooc::create_array(path, dtype, shape, order, overwrite);
  if (!ooc::hdf5::split(path))
    throw ooc::UsageError(path, "--chunks, --compression and --shuffle make HDF5 datasets: name the output FILE.h5:/dataset");
  if (job.spans_ranks()) throw ooc::UsageError(path, "--chunks/--compression outputs are written by one process, not under mpirun");
  ooc::hdf5::Compression how;
  if (!g_chunked.compression.empty()) ooc::hdf5::parse_compression(g_chunked.compression, how);
  how.shuffle = g_chunked.shuffle;
  if (!g_chunked.chunks.empty() && g_chunked.chunks != "auto") {
    const std::string& t = g_chunked.chunks;
    if (t.empty() || t.size() > 15 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoll(t) == 0)
      throw ooc::UsageError("", "--chunks " + t + ": give a number of rows (of the first axis) or auto");
    how.chunk_rows = std::stoll(t);
  }
  if (order == ooc::Order::fortran && shape.size() > 1)
    throw ooc::UsageError(path, "HDF5 datasets are C order: a Fortran-order result cannot be written to one");
  return ooc::detail::MappedArrayAccess::create_compressed_hdf5(path, dtype, shape, overwrite, how);
}

int run_apply(const ooc::cli::Job& job, const Common& common, const std::string& op_spec, const std::string& path,
              const std::string& out_path, bool in_place, bool no_journal, bool json) {
  g_subject = path;
  const auto op = ooc::kernels::ElementwiseOp::parse(op_spec);
  ooc::PipelineOptions options = pipeline_options(common);
  const auto start = std::chrono::steady_clock::now();
  bool resumed = false;
  std::string written;
  ooc::DType result_dtype = ooc::DType(ooc::Kind::floating, 8);
  std::uint64_t bytes = 0;
  ooc::Shape shape;
  if (in_place) {
    if (!job.journals_in_place() && !no_journal)  // durability is not dropped unasked
      throw ooc::UsageError(path, "under MPI an in-place run keeps no crash journal (a run stopped half way "
                                  "leaves the array partly rewritten): add --no-journal to run it so");
    ooc::MappedArray a = job.map_input(path, ooc::Access::read_write, options);
    describe_reads(common, a);
    // A journal makes the run restartable: a run killed half way is finished, exactly
    // once per element, by running the same command again. (Ranks of an MPI job each
    // rewrite their own tiles and keep no journal: such a run cannot be resumed.) With
    // --no-journal the run writes each tile once, as numpy's `a += 1` does, and a run
    // stopped half way leaves the array partly rewritten.
    std::unique_ptr<ooc::InPlaceJournal> journal;
    if (job.journals_in_place() && no_journal) {
      ooc::lock_for_in_place(a);
    } else if (job.journals_in_place()) {
      try {
        journal = ooc::InPlaceJournal::open(a, "oocrun apply " + op.spec() + " --in-place", options);
      } catch (const ooc::UsageError&) {
        throw;
      } catch (const ooc::Error& e) {  // no room or no right to write it beside the array
        if (e.path() != ooc::journal_path(path) || std::filesystem::exists(e.path())) throw;
        throw ooc::Error(e.path(), e.problem() + " (--no-journal runs in place without one)");
      }
      resumed = journal->resumed();
      if (resumed)
        report(common, "resuming the interrupted in-place run on " + path + ": " +
                           std::to_string(journal->tiles_done_before()) + " of " + std::to_string(journal->tiles()) +
                           " tiles were done");
    }
    g_progress.start(common.progress, a, options);
    options.on_progress = std::ref(g_progress);
    try {
      job.apply(op, a, a, options);
      job.commit(a);
    } catch (...) {
      // Set here, when the journal knows whether it was kept (g_cancel_note follows it).
      if (journal)
        g_resume_note = journal->kept() ? "; run the same command again to finish it (progress is kept in " +
                                              journal->path() + ")"
                                        : "; the array is unchanged";
      else if (no_journal)
        g_resume_note = "; the array may be partly rewritten (--no-journal: the run cannot be resumed)";
      g_cancel_note = g_resume_note;
      throw;
    }
    if (journal) journal->finish();
    written = path;
    result_dtype = a.dtype();
    bytes = a.nbytes();
    shape = a.shape();
  } else {
    const ooc::MappedArray a = job.map_input(path, ooc::Access::read_only, options);
    describe_reads(common, a);
    size_tiles_for(job, a, options);
    std::error_code ec;
    if (std::filesystem::equivalent(path, out_path, ec))
      throw ooc::UsageError(out_path, "output is the input file; use --in-place to modify it");
    ooc::check_not_in_place(a);
    g_cancel_note = "; no output written";
    ooc::MappedArray out =
        make_output(job, out_path, op.result_dtype(a.dtype(), a.ndim()), &a, a.shape(), a.order(), common.overwrite);
    g_progress.start(common.progress, a, options);
    options.on_progress = std::ref(g_progress);
    job.apply(op, a, out, options);
    stop_if_cancelled(job);
    job.commit(out);
    written = out_path;
    result_dtype = out.dtype();
    bytes = a.nbytes();
    shape = a.shape();
  }
  const double seconds = seconds_since(start);
  if (json) {
    ooc::cli::Json j;
    j.begin_object().member("op", op.spec()).member("input", path).member("output", written);
    j.member("in_place", in_place);
    if (in_place) j.member("resumed", resumed);
    j.member("dtype", result_dtype.descr()).key("shape");
    shape_json(j, shape);
    j.member("bytes", bytes).member("seconds", seconds).end_object();
    std::cout << j.text() << "\n";
  }
  report(common, op.spec() + " " + path + " -> " + written + " (" + result_dtype.name() + "): " +
                     ooc::cli::rate_text(bytes, seconds));
  return 0;
}

struct ReduceArgs {
  std::int64_t ddof = 0;
  std::int64_t bins = 10;
  std::string range;  // "LO:HI"
  std::optional<int> axis;
  std::string output;
};

// Results larger than this are written with -o rather than printed.
constexpr std::int64_t kMaxPrintedElements = std::int64_t{1} << 20;

// A result array as numpy's tolist() nests it (C order), from values in `order`.
void nested_json(ooc::cli::Json& j, const std::byte* data, ooc::DType dtype, const ooc::Shape& shape,
                 ooc::Order order) {
  const ooc::Shape memory_stride = ooc::element_strides(shape, order);
  auto element = [&](std::int64_t at) {
    ooc::visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
      T v;
      std::memcpy(static_cast<void*>(&v), data + at * dtype.itemsize(), sizeof v);
      j.scalar(ooc::Scalar::of(v));
    });
  };
  auto walk = [&](auto&& self, std::size_t axis, std::int64_t at) -> void {
    if (axis == shape.size()) {
      element(at);
      return;
    }
    j.begin_array();
    for (std::int64_t i = 0; i < shape[axis]; ++i) self(self, axis + 1, at + i * memory_stride[axis]);
    j.end_array();
  };
  walk(walk, 0, 0);
}

// Numbers as JSON writes them, but the non-finite ones bare (NaN, Infinity,
// -Infinity): what oocrun prints without --json, as it always has.
std::string plain_text(std::string json) {
  for (const char* word : {"\"NaN\"", "\"Infinity\"", "\"-Infinity\""}) {
    const std::string quoted = word;
    for (std::size_t at = json.find(quoted); at != std::string::npos; at = json.find(quoted, at))
      json.replace(at, quoted.size(), quoted.substr(1, quoted.size() - 2));
  }
  return json;
}

std::string nested_text(const std::byte* data, ooc::DType dtype, const ooc::Shape& shape, ooc::Order order) {
  ooc::cli::Json j;
  nested_json(j, data, dtype, shape, order);
  return plain_text(j.text());
}

ooc::kernels::ReduceOp parse_reduction(const std::string& name, const ReduceArgs& args) {
  ooc::kernels::ReduceParams params;
  params.ddof = args.ddof;
  params.bins = args.bins;
  if (!args.range.empty()) {
    const std::size_t colon = args.range.find(':', args.range[0] == '-' ? 1 : 0);
    if (colon == std::string::npos) throw ooc::UsageError("", "--range wants LO:HI, not '" + args.range + "'");
    try {
      params.range = {ooc::kernels::PyScalar::parse(args.range.substr(0, colon)),
                      ooc::kernels::PyScalar::parse(args.range.substr(colon + 1))};
    } catch (const std::invalid_argument& e) {
      throw ooc::UsageError("", std::string("--range: ") + e.what());
    }
  }
  return ooc::kernels::ReduceOp::parse(name, params);
}


int run_reduce_axis(const ooc::cli::Job& job, const Common& common, const ooc::kernels::ReduceOp& op,
                    const ReduceArgs& args, const std::string& path, bool json) {
  if (op.code() == ooc::kernels::ReduceOp::Code::histogram)
    throw ooc::UsageError("", "histogram takes no --axis (numpy's has none)");
  refuse_across_ranks(job, "reduce --axis");
  ooc::PipelineOptions options = pipeline_options(common);
  const ooc::MappedArray a = job.map_input(path, ooc::Access::read_only, options);
  describe_reads(common, a);
  size_tiles_for(job, a, options);
  ooc::check_not_in_place(a);
  int axis = 0;
  try {
    axis = ooc::kernels::normalize_axis(*args.axis, a.ndim());
  } catch (const ooc::UsageError& e) {
    throw ooc::UsageError(path, e.problem());
  }
  const ooc::Shape shape = ooc::kernels::drop_axis(a.shape(), axis);
  const ooc::DType dtype = op.result_dtype(a.dtype());
  const std::int64_t count = *ooc::element_count(shape);
  g_progress.start(common.progress, a.dtype().itemsize());
  options.on_progress = std::ref(g_progress);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::byte> values;
  if (!args.output.empty()) {
    std::error_code ec;
    if (std::filesystem::equivalent(path, args.output, ec))
      throw ooc::UsageError(args.output, "output is the input file");
    g_cancel_note = "; no output written";
    ooc::MappedArray out = ooc::create_array(args.output, dtype, shape, a.order(), common.overwrite);
    op.run_axis(a, axis, out.writable_bytes(), options);
    stop_if_cancelled(job);
    out.commit();
  } else {
    if (count > kMaxPrintedElements)
      throw ooc::UsageError(path, "the result has " + std::to_string(count) +
                                      " elements; write it to a file with -o OUT.npy");
    values.resize(static_cast<std::size_t>(count) * static_cast<std::size_t>(dtype.itemsize()));
    op.run_axis(a, axis, values, options);
  }
  const double seconds = seconds_since(start);
  if (json) {
    ooc::cli::Json j;
    j.begin_object().member("op", op.name()).member("axis", axis);
    if (args.output.empty()) nested_json(j.key("value"), values.data(), dtype, shape, a.order());
    else j.member("output", args.output);
    j.member("dtype", dtype.name()).key("shape");
    shape_json(j, shape);
    j.member("path", path).member("elements", a.size()).member("bytes", a.nbytes()).member("seconds", seconds);
    std::cout << j.end_object().text() << "\n";
  } else if (args.output.empty()) {
    std::cout << nested_text(values.data(), dtype, shape, a.order()) << "\n";
  }
  report(common, op.name() + " along axis " + std::to_string(axis) + " of " + path + ": " +
                     ooc::cli::rate_text(a.nbytes(), seconds));
  return 0;
}

int run_reduce(const ooc::cli::Job& job, const Common& common, const std::string& op_name, const ReduceArgs& args,
               const std::string& path, bool json) {
  g_subject = path;
  const auto op = parse_reduction(op_name, args);
  if (args.axis) return run_reduce_axis(job, common, op, args, path, json);
  if (!args.output.empty()) throw ooc::UsageError("", "reduce -o needs --axis (a full reduction is one value)");
  ooc::PipelineOptions options = pipeline_options(common);
  const ooc::MappedArray a = job.map_input(path, ooc::Access::read_only, options);
  describe_reads(common, a);
  size_tiles_for(job, a, options);
  ooc::check_not_in_place(a);
  g_progress.start(common.progress, a, options);
  options.on_progress = std::ref(g_progress);
  const auto start = std::chrono::steady_clock::now();
  ooc::cli::Json j;  // the object, its value members written as they come
  j.begin_object().member("op", op.name());
  std::string value_text, dtype_name;
  if (op.code() == ooc::kernels::ReduceOp::Code::histogram) {
    refuse_across_ranks(job, "histogram");
    const ooc::kernels::HistogramResult h = op.histogram(a, options);
    // Edges in their dtype (float64, or float16/32 for such data), as numpy gives them.
    auto write_counts = [&](ooc::cli::Json& out) {
      out.begin_array();
      for (std::int64_t c : h.counts) out.integer(c);
      out.end_array();
    };
    auto write_edges = [&](ooc::cli::Json& out) {
      out.begin_array();
      for (double e : h.edges)
        ooc::visit_dtype(h.edge_dtype, [&]<class E>(std::type_identity<E>) {
          E rounded;
          ooc::convert(ooc::dtype_of<double>, &e, ooc::dtype_of<E>, &rounded, 1);
          out.scalar(ooc::Scalar::of(rounded));
        });
      out.end_array();
    };
    j.member("counts", write_counts).member("edges", write_edges);
    ooc::cli::Json counts, edges;
    write_counts(counts);
    write_edges(edges);
    value_text = counts.text() + "\n" + plain_text(edges.text());
    dtype_name = h.edge_dtype.name();
  } else {
    const ooc::Scalar value = job.reduce(op, a, options);
    j.member("value", value);
    value_text = value.to_string();
    dtype_name = value.dtype().name();
  }
  const double seconds = seconds_since(start);
  using Code = ooc::kernels::ReduceOp::Code;
  const bool empty_is_nan = a.size() == 0 && (op.code() == Code::mean || op.code() == Code::nanmean ||
                                              op.code() == Code::var || op.code() == Code::std);
  const std::string warning = op.name() + " of an empty array is nan";  // numpy warns too
  if (json) {
    j.member("dtype", dtype_name).member("path", path).member("elements", a.size()).member("bytes", a.nbytes());
    j.member("seconds", seconds);
    if (empty_is_nan) j.member("warning", warning);
    std::cout << j.end_object().text() << "\n";
  } else {
    std::cout << value_text << "\n";
  }
  if (empty_is_nan) report(common, path + ": warning: " + warning);
  report(common, op.name() + " of " + path + ": " + ooc::cli::rate_text(a.nbytes(), seconds));
  return 0;
}

int run_eval(const ooc::cli::Job& job, const Common& common, const std::string& expr,
             const std::vector<std::string>& bound, const std::string& out_path, bool json) {
  refuse_across_ranks(job, "eval");
  // NAME=ARRAY arguments, mapped read-only for as long as the expression runs.
  std::vector<std::string> names;
  std::vector<ooc::MappedArray> arrays;
  arrays.reserve(bound.size());
  for (const std::string& arg : bound) {
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq == std::string::npos ? 0 : eq);
    const bool identifier = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                            std::all_of(name.begin(), name.end(), [](char c) {
                              return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                            });
    if (eq == std::string::npos || !identifier)
      throw ooc::UsageError("", "eval: '" + arg + "' is not NAME=ARRAY (as in a=x.npy)");
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw ooc::UsageError("", "eval: the name '" + name + "' is bound twice");
    names.push_back(name);
    arrays.push_back(ooc::map_file(arg.substr(eq + 1)));
    ooc::check_not_in_place(arrays.back());
    describe_reads(common, arrays.back());
  }
  std::vector<ooc::kernels::Binding> bindings;
  for (std::size_t i = 0; i < names.size(); ++i) bindings.push_back({names[i], &arrays[i]});
  const auto expression = ooc::kernels::Expression::compile(expr, bindings);
  ooc::PipelineOptions options = pipeline_options(common);
  const std::uint64_t asked_tile_bytes = options.tile_bytes;
  for (const ooc::MappedArray& a : arrays)  // the sparsest selection sizes the tiles
    options.tile_bytes = std::min(options.tile_bytes, ooc::tile_bytes_spanning(a, asked_tile_bytes));
  g_progress.start(common.progress, expression.dtype().itemsize());
  options.on_progress = std::ref(g_progress);
  const auto start = std::chrono::steady_clock::now();
  std::string dtype_name = expression.dtype().name();
  std::optional<ooc::Scalar> scalar;  // a reduction's value
  std::vector<std::byte> values;      // or the result's, printed
  ooc::Shape shape = expression.shape();
  // An error that comes from the data (an integer to a negative power, max of nothing)
  // names the arrays it was computed from.
  auto inputs = [&] {
    std::string names;
    for (const ooc::MappedArray& a : arrays) names += (names.empty() ? "" : ", ") + a.path();
    return names;
  };
  // A cancelled evaluation names its output, or the arrays it reads.
  g_subject = out_path.empty() ? inputs() : out_path;
  if (expression.reduction() && !out_path.empty())
    throw ooc::UsageError(out_path, "eval: a reduction gives one value; drop -o");
  // The output is made before the evaluation: its errors are its own, not the inputs'.
  std::optional<ooc::MappedArray> out;
  if (!expression.reduction() && !out_path.empty()) {
    for (const ooc::MappedArray& a : arrays) {
      std::error_code ec;
      if (std::filesystem::equivalent(a.path(), out_path, ec))
        throw ooc::UsageError(out_path, "eval: the output is one of the inputs");
    }
    g_cancel_note = "; no output written";
    out.emplace(make_output(job, out_path, expression.dtype(), nullptr, expression.shape(), expression.order(),
                            common.overwrite));
  }
  try {
    if (expression.reduction()) {
      scalar = expression.reduce(options);
      dtype_name = scalar->dtype().name();
      shape = {};
    } else if (out) {
      expression.evaluate(*out, options);
      stop_if_cancelled(job);
      out->commit();
    } else {
      const std::int64_t count = *ooc::element_count(expression.shape());
      if (count > kMaxPrintedElements)
        throw ooc::UsageError("", "eval: the result has " + std::to_string(count) +
                                      " elements; write it to a file with -o OUT.npy");
      values = expression.evaluate(options);
    }
  } catch (const ooc::UsageError&) {
    throw;
  } catch (const ooc::Cancelled&) {
    throw;
  } catch (const ooc::Error& e) {
    if (!e.path().empty() || arrays.empty()) throw;
    throw ooc::Error(inputs(), e.problem());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    if (arrays.empty()) throw;
    throw ooc::Error(inputs(), e.what());
  }
  const double seconds = seconds_since(start);
  if (json) {
    ooc::cli::Json j;
    j.begin_object().member("expr", expr);
    if (scalar) j.member("value", *scalar);
    else if (out_path.empty()) nested_json(j.key("value"), values.data(), expression.dtype(), shape, expression.order());
    else j.member("output", out_path);
    j.member("dtype", dtype_name).key("shape");
    shape_json(j, shape);
    std::cout << j.member("seconds", seconds).end_object().text() << "\n";
  } else if (scalar) {
    std::cout << scalar->to_string() << "\n";
  } else if (out_path.empty()) {
    std::cout << nested_text(values.data(), expression.dtype(), shape, expression.order()) << "\n";
  }
  report(common, "eval " + expr + ": " + std::to_string(seconds) + " s");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before MPI starts its threads (under mpirun), so that they block these signals too.
  start_signal_watch();
  std::unique_ptr<ooc::cli::Job> job;
  try {
    job = ooc::cli::Job::start(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "oocrun: " << one_line(e.what()) << "\n";
    return kExitRuntime;
  }
  if (!job->prints()) {
    // Under MPI every rank runs this same command; rank 0 alone speaks for them all.
    std::cout.setstate(std::ios::badbit);
    std::cerr.setstate(std::ios::badbit);
  }

  CLI::App app{"oocrun: stream arrays larger than memory through kernels, tile by tile"};
  app.require_subcommand(1);
  Common common;
  app.add_option("--threads", common.threads, "worker threads (default: every core)")->check(CLI::Range(1, 4096));
  app.add_option("--tile-bytes", common.tile_bytes, "bytes per tile, e.g. 64M or 1G (default 16M)");
  app.add_option("--prefetch", common.prefetch, "tiles whose pages are requested ahead (default 2)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--io", common.io_mode,
                 "mmap, direct (O_DIRECT into reused buffers) or auto (default: direct for new outputs and "
                 "for cold inputs larger than memory, mmap otherwise)")
      ->check(CLI::IsMember({"auto", "mmap", "direct"}));
  app.add_flag("--progress", common.progress, "show progress on stderr");
  app.add_flag("--quiet", common.quiet, "print nothing but results and errors (and progress, if --progress asks)");
  app.add_flag("--verbose", common.verbose, "also say how each input is read (selections: runs, spans, advice)");

  std::string op, path, out_path;
  bool json = false, in_place = false, no_journal = false;

  CLI::App* info = app.add_subcommand("info", "print an array's dtype, shape and layout");
  info->add_option("ARRAY", path, "path.npy, file.h5 or file.h5:/dataset")->required();
  info->add_flag("--json", json, kJsonHelp);

  CLI::App* apply = app.add_subcommand("apply",
      "apply an elementwise operation: add:C sub:C mul:C div:C pow:C neg abs sqrt exp log log1p expm1 sin cos "
      "tanh "
      "clip:LO:HI cast:DTYPE add-one scale:C");
  apply->add_option("OP", op, "operation")->required();
  apply->add_option("ARRAY", path, "input: path.npy or file.h5:/dataset")->required();
  CLI::Option* out_option = apply->add_option("-o,--output", out_path, "output: path.npy or file.h5:/dataset");
  CLI::Option* in_place_flag = apply->add_flag("--in-place", in_place, "modify ARRAY itself");
  out_option->excludes(in_place_flag);
  apply->add_flag("--no-journal", no_journal,
                  "with --in-place: keep no crash journal (faster; a run stopped half way leaves ARRAY partly "
                  "rewritten, as numpy's a += 1 would)")
      ->needs(in_place_flag);
  apply->add_flag("--json", json, kJsonHelp);
  apply->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  for (CLI::App* sub : {apply}) {
    sub->add_option("--chunks", g_chunked.chunks, "HDF5 output: chunks of N rows (first axis), or auto (about 1 MiB)");
    sub->add_option("--compression", g_chunked.compression, "HDF5 output: gzip[:LEVEL], lz4 or blosc[:CODEC[:LEVEL]]");
    sub->add_flag("--shuffle", g_chunked.shuffle, "HDF5 output: byte shuffle before compressing");
  }

  ReduceArgs reduce_args;
  CLI::App* reduce = app.add_subcommand(
      "reduce",
      "reduce all elements: sum prod mean min max argmin argmax var std count_nonzero any all nansum nanmean "
      "nanmin nanmax norm histogram");
  reduce->add_option("OP", op, "reduction")->required();
  reduce->add_option("ARRAY", path, "path.npy or file.h5:/dataset")->required();
  reduce->add_flag("--json", json, kJsonHelp);
  reduce->add_option("--ddof", reduce_args.ddof, "var, std: delta degrees of freedom (default 0)");
  reduce->add_option("--bins", reduce_args.bins, "histogram: number of equal bins (default 10)");
  reduce->add_option("--range", reduce_args.range, "histogram: LO:HI (default: the data's min and max)");
  reduce->add_option("--axis", reduce_args.axis, "reduce along this axis only (negative: from the end)");
  reduce->add_option("-o,--output", reduce_args.output, "with --axis: write the result to path.npy or file.h5:/dataset");
  reduce->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");

  std::string expr;
  std::vector<std::string> bound;
  CLI::App* eval = app.add_subcommand("eval", "evaluate a numpy expression over named arrays, tile by tile");
  eval->add_option("EXPR", expr, "expression, e.g. \"2*a + sqrt(b)\" or \"sum(a*b)\"")->required();
  eval->add_option("NAME=ARRAY", bound, "the arrays the names stand for");
  eval->add_option("-o,--output", out_path, "write the result to path.npy or file.h5:/dataset");
  eval->add_flag("--json", json, kJsonHelp);
  eval->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  eval->add_option("--chunks", g_chunked.chunks, "HDF5 output: chunks of N rows (first axis), or auto (about 1 MiB)");
  eval->add_option("--compression", g_chunked.compression, "HDF5 output: gzip[:LEVEL], lz4 or blosc[:CODEC[:LEVEL]]");
  eval->add_flag("--shuffle", g_chunked.shuffle, "HDF5 output: byte shuffle before compressing");

  for (CLI::App* sub : {info, apply, reduce, eval}) sub->fallthrough();
  ooc::cli::TextCommands text_commands(app, path, out_path);  // import, export (src/cli/text.cpp)

  // An expression may start with '-' ("-a * b"): a space in front keeps CLI11 from reading
  // it as an option, and the parser ignores it.
  std::vector<std::string> args(argv, argv + argc);
  bool spaced_expression = false;
  for (int i = 1; i + 1 < argc; ++i) {
    if (args[static_cast<std::size_t>(i)] != "eval") continue;
    std::string& next = args[static_cast<std::size_t>(i) + 1];
    // An option of eval's or oocrun's own ("--tile-bytes=64K" by its name) stays one;
    // anything else starting with '-' ("-a * b", "--w") is the expression.
    const std::string name = next.substr(0, next.find('='));
    const bool option = name == "--" || name == "-h" || name == "--help" ||
                        app.get_option_no_throw(name) != nullptr || eval->get_option_no_throw(name) != nullptr;
    if (next.size() > 1 && next[0] == '-' && !option) {
      next.insert(0, " ");
      spaced_expression = true;
    }
    break;
  }
  std::vector<char*> arg_pointers;
  for (std::string& a : args) arg_pointers.push_back(a.data());

  try {
    app.parse(argc, arg_pointers.data());
    if (spaced_expression && !expr.empty() && expr[0] == ' ') expr.erase(0, 1);
    if (apply->parsed() && out_path.empty() && !in_place)
      throw CLI::ValidationError("apply needs -o OUT or --in-place");
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string what = one_line(e.what());
    if (app.get_subcommands().empty()) {
      // CLI11 says only "A subcommand is required"; name the word it did not know.
      for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (word.empty() || word[0] == '-') continue;
        what = "unknown command '" + word + "' (known: info, apply, reduce, eval, import, export)";
        break;
      }
    }
    std::cerr << "oocrun: " << what << " (see oocrun --help)\n";
    return kExitUsage;
  }

  if (!job->prints()) common.progress = false;
  common.json = json;
  try {
    if (info->parsed()) return run_info(path, json);
    if (text_commands.importing()) check_output_name(out_path);  // export's output is text: exempt
    if (text_commands.parsed()) return text_commands.run(pipeline_options(common), common.progress, common.quiet);
    for (const std::string& out : {out_path, reduce_args.output})
      if (!out.empty()) check_output_name(out);
    if (apply->parsed()) return run_apply(*job, common, op, path, out_path, in_place, no_journal, json);
    if (eval->parsed()) return run_eval(*job, common, expr, bound, out_path, json);
    return run_reduce(*job, common, op, reduce_args, path, json);
  } catch (const ooc::Cancelled& e) {
    g_progress.end_line();
    const int sig = g_signal.load();
    const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    std::string what = (g_subject.empty() ? std::string(eval->parsed() ? "eval" : "") : g_subject) + ": " + name +
                       ": cancelled after " + g_progress.done_text() + g_cancel_note;
    if (text_commands.parsed()) what = path + ": " + name + ": cancelled; no output written";
    std::cerr << "oocrun: " << one_line(what) << "\n";
    return 128 + sig;
  } catch (const ooc::UsageError& e) {
    g_progress.end_line();
    std::cerr << "oocrun: " << one_line(e.what() + g_resume_note) << "\n";
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    // Kernels name the file themselves (rethrow_naming); this is an allocation outside
    // one (a printed result, a plan): name the array the command names.
    g_progress.end_line();
    const std::string& name = path.empty() ? out_path : path;
    std::cerr << "oocrun: " << one_line((name.empty() ? "" : name + ": ") + "out of memory" + g_resume_note) << "\n";
    return kExitRuntime;
  } catch (const std::exception& e) {
    g_progress.end_line();
    std::cerr << "oocrun: " << one_line(e.what() + g_resume_note) << "\n";
    return kExitRuntime;
  }
}
