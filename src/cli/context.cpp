#include "cli/context.hpp"

#include "cli/options.hpp"
#include "format/hdf5.hpp"

#include <iostream>
#include <new>

namespace ooc::cli {

const char* const kJsonHelp =
    "print one JSON object (RFC 8259: NaN, inf, -inf as the strings \"NaN\", \"Infinity\", \"-Infinity\"); "
    "stderr then carries errors only";

void Context::report(const std::string& line) const {
  if (!common.quiet && !common.json) std::cerr << "oocrun: " << line << "\n";
}

void Context::describe_reads(const MappedArray& array) const {
  if (!common.verbose || common.quiet) return;
  const std::string summary = selection_summary(array);
  if (!summary.empty()) std::cerr << "oocrun: " << summary << "\n";
}

PipelineOptions Context::pipeline_options() const {
  PipelineOptions options;
  options.cancel = signals.cancel_flag();
  options.threads = common.threads;
  try {
    options.tile_bytes = parse_size(common.tile_bytes);
  } catch (const UsageError& e) {
    throw UsageError("--tile-bytes: " + e.problem());
  }
  if (options.tile_bytes == 0) throw UsageError("--tile-bytes must be positive");
  options.prefetch = common.prefetch;
  options.io = common.io_mode == "mmap" ? Io::mapped : common.io_mode == "direct" ? Io::direct : Io::automatic;
  return options;
}

void Context::follow_progress(PipelineOptions& options, const MappedArray& array) {
  progress.start(common.progress, array, options);
  options.on_progress = std::ref(progress);
}

void Context::follow_progress(PipelineOptions& options, int itemsize) {
  progress.start(common.progress, itemsize);
  options.on_progress = std::ref(progress);
}

void Context::refuse_across_ranks(const std::string& what) const {
  if (job.spans_ranks()) throw UsageError(what + " does not run under MPI yet; run it without mpirun");
}

void Context::stop_if_cancelled() const {
  if (signals.cancelled() && !job.spans_ranks()) throw Cancelled("cancelled");
}

void Context::size_tiles_for(const MappedArray& a, PipelineOptions& options) const {
  if (!job.spans_ranks()) options.tile_bytes = tile_bytes_spanning(a, options.tile_bytes);
}

void check_output_name(const std::string& out) {
  if (out.size() >= 4 && out.ends_with(".npy")) return;
  if (hdf5::split(out)) return;
  throw UsageError(out, "an output is a .npy file (out.npy) or an HDF5 dataset (file.h5:/dataset)");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

int fail(Context& context, std::exception_ptr failure) {
  context.progress.end_line();
  const FailureNotes& notes = context.notes;
  auto say = [](const std::string& line) { std::cerr << "oocrun: " << one_line(line) << "\n"; };
  try {
    std::rethrow_exception(failure);
  } catch (const Cancelled&) {
    std::string line = notes.subject + ": " + context.signals.signal_name() + ": cancelled";
    if (notes.cancel_tells_progress) line += " after " + context.progress.done_text();
    say(line + notes.cancel_note);
    return 128 + context.signals.signal();
  } catch (const UsageError& e) {
    say(e.what() + notes.error_note);
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    // Kernels name the file themselves (rethrow_naming); this is an allocation outside
    // one (a printed result, a plan): name the array the command names.
    say((notes.file.empty() ? "" : notes.file + ": ") + "out of memory" + notes.error_note);
    return kExitRuntime;
  } catch (const std::exception& e) {  // ooc::Error, or a bug's std::logic_error
    say(e.what() + notes.error_note);
    return kExitRuntime;
  }
}

}  // namespace ooc::cli
