#pragma once
// What every oocrun subcommand shares: the options common to all, the job, the signal
// watch, the progress reporter, and what a failure line says beyond the error itself.

#include "cli/job.hpp"
#include "cli/progress.hpp"
#include "cli/signal_watch.hpp"
#include "ooc/ooc.hpp"

#include <chrono>
#include <exception>
#include <string>

namespace ooc::cli {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

/// --json's help, the same for every subcommand.
extern const char* const kJsonHelp;

/// oocrun's options before the subcommand, and the flags several subcommands share.
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

/// What oocrun's one error line adds to the error, filled in by the command as the run
/// learns it (fail() reads it).
struct FailureNotes {
  /// The array the command names: an allocation that fails outside a kernel names it.
  std::string file;
  /// What a cancelled run names first ("OUT: SIGINT: cancelled after ...").
  std::string subject;
  /// Whether a cancelled run says how far it got ("after 12 of 256 tiles ...").
  bool cancel_tells_progress = true;
  /// After a cancelled run's line: "; no output written", or how to finish an in-place run.
  std::string cancel_note;
  /// After any other error's line: how to finish the in-place run it interrupted.
  std::string error_note;
};

class Context {
 public:
  Context(const Job& job, const SignalWatch& signals) : job(job), signals(signals) {}

  const Job& job;
  const SignalWatch& signals;
  Common common;
  ProgressReporter progress;
  FailureNotes notes;

  /// A summary or note on stderr: not with --quiet, nor with --json, whose object carries
  /// what a reader needs (stderr then holds errors alone, and --progress where asked).
  void report(const std::string& line) const;
  /// --verbose: how an input is read (a selection's runs, spans and page advice).
  void describe_reads(const MappedArray& array) const;
  /// The pipeline options the common options ask for, cancelled by the signal watch.
  PipelineOptions pipeline_options() const;
  /// Starts the progress reporter for a run over `array` and points `options` at it.
  void follow_progress(PipelineOptions& options, const MappedArray& array);
  /// The same for a run whose plan the first report tells.
  void follow_progress(PipelineOptions& options, int itemsize);
  /// Steps not yet split across the ranks of an MPI job are refused there, rather than
  /// run by every rank at once.
  void refuse_across_ranks(const std::string& what) const;
  /// A signal that came after the last tile still cancels a new output: it is not put in
  /// place. (Across MPI ranks, commit's agreement is where every rank learns of a cancel.)
  void stop_if_cancelled() const;
  /// A selection's tiles are sized by the bytes of its source they span
  /// (ooc::tile_bytes_spanning), so that a sparse one is cut into enough tiles for every
  /// thread. Not across MPI ranks: their shares were cut from the options as given.
  void size_tiles_for(const MappedArray& a, PipelineOptions& options) const;
  /// An input read, not written: mapped read-only, its reads described (--verbose), the
  /// tiles sized for it, and refused while an in-place run rewrites it (its journal).
  MappedArray open_to_read(const std::string& path, PipelineOptions& options) const;
};

/// What -o may name (apply, reduce --axis, eval, import): a .npy file or an HDF5 dataset.
/// Anything else is refused before anything is opened or created, rather than written as
/// a .npy under that name (`-o Z.txt`, `-o -`) or through a link to a device or pipe
/// (`-o /dev/stdout`): oocrun writes arrays to files, never to a stream. Throws UsageError.
void check_output_name(const std::string& out);

double seconds_since(std::chrono::steady_clock::time_point start);

/// Line ends turned to spaces, trailing spaces dropped: an error is one line.
std::string one_line(std::string text);

/// The error as oocrun says it: what(), with the words that name an option in the
/// library's terms (Error::option(): "overwrite", "tile_bytes") said as oocrun's flag
/// ("--overwrite", "--tile-bytes"). An option oocrun has no flag for stays as it is.
std::string error_text(const Error& error);

/// Prints the one line for the error `failure` that stopped the run and returns oocrun's
/// exit status: 128 + the signal for a cancelled run, 2 for a UsageError, 1 otherwise.
int fail(Context& context, std::exception_ptr failure);

}  // namespace ooc::cli
