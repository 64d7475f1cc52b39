#include "cli/context.hpp"

#include "cli/options.hpp"
#include "ooc/zarr.hpp"
#include "ooc/array_path.hpp"

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
  RunOptions run;
  run.threads = common.threads;
  run.tile_bytes = common.tile_bytes;
  run.io = common.io_mode;
  run.prefetch = common.prefetch;
  PipelineOptions options = run.pipeline_options();  // its errors name the option: fail() says the flag
  options.cancel = signals.cancel_flag();
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
  options.tiles_span_source = false;  // sized here (not at all for MPI ranks, whose plans must agree)
}

MappedArray Context::open_to_read(const std::string& path, PipelineOptions& options) const {
  MappedArray a = job.map_input(path, Access::read_only, options);
  describe_reads(a);
  size_tiles_for(a, options);
  check_not_in_place(a);
  return a;
}

void check_output_name(const std::string& out) {
  if (out.size() >= 4 && out.ends_with(".npy")) return;
  if (ArrayPath::parse(out).in_hdf5() || is_zarr(out)) return;
  throw UsageError(out, "an output is a .npy file (out.npy), an HDF5 dataset (file.h5:/dataset) or a Zarr array "
                        "(out.zarr)");
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

std::string error_text(const Error& error) {
  // The library's words for an option, and oocrun's for the same.
  static const std::pair<const char*, const char*> kFlags[] = {
      {"overwrite", "--overwrite"},
      {"tile_bytes", "--tile-bytes"},
      {"threads", "--threads"},
      {"prefetch", "--prefetch"},
      {"io", "--io"},
      {"dtype", "--dtype"},
      {"skip_rows", "--skip-rows"},
      {"missing", "--missing"},
      {"fmt", "--fmt"},
      {"ddof", "--ddof"},
      {"axis", "--axis"},
      {"compression", "--compression"},
      {"chunks/compression", "--chunks/--compression"},
      {"chunks and compression", "--chunks and --compression"},
      {"without a journal", "with --no-journal"},
      {"temp_dir", "--temp-dir"},
  };
  const std::string& words = error.option();
  if (words.empty()) return error.what();
  std::string problem = error.problem();
  const std::size_t at = problem.find(words);
  if (at == std::string::npos) return error.what();
  for (const auto& [library, flag] : kFlags) {
    if (words != library) continue;
    problem.replace(at, words.size(), flag);
    return error.path().empty() ? problem : error.path() + ": " + problem;
  }
  return error.what();
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
    say(error_text(e) + notes.error_note);
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    // Kernels name the file themselves (rethrow_naming); this is an allocation outside
    // one (a printed result, a plan): name the array the command names.
    say((notes.file.empty() ? "" : notes.file + ": ") + "out of memory" + notes.error_note);
    return kExitRuntime;
  } catch (const Error& e) {
    say(error_text(e) + notes.error_note);
    return kExitRuntime;
  } catch (const std::exception& e) {  // a bug's std::logic_error
    say(e.what() + notes.error_note);
    return kExitRuntime;
  }
}

}  // namespace ooc::cli
