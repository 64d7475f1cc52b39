// oocrun apply: one elementwise operation, into a new array or in place.

#include "cli/commands.hpp"
#include "cli/json.hpp"
#include "cli/options.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

namespace ooc::cli {

ApplyCommand::ApplyCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand(
          "apply",
          "apply an elementwise operation: add:C sub:C mul:C div:C pow:C neg abs sqrt exp log log1p expm1 sin cos "
          "tanh clip:LO:HI cast:DTYPE add-one scale:C")) {
  command_->add_option("OP", op_, "operation")->required();
  command_->add_option("ARRAY", path_, "input: path.npy or file.h5:/dataset")->required();
  CLI::Option* output = command_->add_option("-o,--output", output_, "output: path.npy or file.h5:/dataset");
  CLI::Option* in_place = command_->add_flag("--in-place", in_place_, "modify ARRAY itself");
  output->excludes(in_place);
  command_->add_flag("--no-journal", no_journal_,
                     "with --in-place: keep no crash journal (faster; a run stopped half way leaves ARRAY partly "
                     "rewritten, as numpy's a += 1 would)")
      ->needs(in_place);
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  chunked_.add_options(*command_);
  command_->fallthrough();
}

void ApplyCommand::validate() const {
  if (parsed() && output_.empty() && !in_place_) throw CLI::ValidationError("apply needs -o OUT or --in-place");
}

int ApplyCommand::run(Context& context) const {
  const Job& job = context.job;
  const Common& common = context.common;
  FailureNotes& notes = context.notes;
  notes.file = notes.subject = path_;
  if (!output_.empty()) check_output_name(output_);
  const auto op = kernels::ElementwiseOp::parse(op_);
  PipelineOptions options = context.pipeline_options();
  const auto start = std::chrono::steady_clock::now();
  bool resumed = false;
  std::string written;
  DType result_dtype = DType(Kind::floating, 8);
  std::uint64_t bytes = 0;
  Shape shape;
  if (in_place_) {
    if (!job.journals_in_place() && !no_journal_)  // durability is not dropped unasked
      throw UsageError(path_, "under MPI an in-place run keeps no crash journal (a run stopped half way "
                              "leaves the array partly rewritten): add --no-journal to run it so");
    MappedArray a = job.map_input(path_, Access::read_write, options);
    context.describe_reads(a);
    // A journal makes the run restartable: a run killed half way is finished, exactly
    // once per element, by running the same command again. (Ranks of an MPI job each
    // rewrite their own tiles and keep no journal: such a run cannot be resumed.) With
    // --no-journal the run writes each tile once, as numpy's `a += 1` does, and a run
    // stopped half way leaves the array partly rewritten.
    std::unique_ptr<InPlaceJournal> journal;
    if (job.journals_in_place() && no_journal_) {
      lock_for_in_place(a);
    } else if (job.journals_in_place()) {
      try {
        journal = InPlaceJournal::open(a, "oocrun apply " + op.spec() + " --in-place", options);
      } catch (const UsageError&) {
        throw;
      } catch (const Error& e) {  // no room or no right to write it beside the array
        if (e.path() != journal_path(path_) || std::filesystem::exists(e.path())) throw;
        throw Error(e.path(), e.problem() + " (--no-journal runs in place without one)", e.kind());
      }
      resumed = journal->resumed();
      if (resumed && journal->tiles_done_before() == journal->tiles())  // only its journal's removal was cut short
        context.report("the in-place run on " + path_ + " had finished (" + std::to_string(journal->tiles()) + " " +
                       journal->unit() + " done): nothing is applied again, its journal is removed");
      else if (resumed)
        context.report("resuming the interrupted in-place run on " + path_ + ": " +
                       std::to_string(journal->tiles_done_before()) + " of " + std::to_string(journal->tiles()) +
                       " " + journal->unit() + " were done");
    }
    context.follow_progress(options, a);
    try {
      job.apply(op, a, a, options);
      job.commit(a);
    } catch (...) {
      // Said here, when the journal knows whether it was kept.
      if (journal)
        notes.error_note = journal->kept() ? "; run the same command again to finish it (progress is kept in " +
                                                 journal->path() + ")"
                                           : "; the array is unchanged";
      else if (no_journal_)
        notes.error_note = "; the array may be partly rewritten (--no-journal: the run cannot be resumed)";
      notes.cancel_note = notes.error_note;
      throw;
    }
    if (journal) journal->finish();
    written = path_;
    result_dtype = a.dtype();
    bytes = a.nbytes();
    shape = a.shape();
  } else {
    const MappedArray a = job.map_input(path_, Access::read_only, options);
    context.describe_reads(a);
    context.size_tiles_for(a, options);
    std::error_code ec;
    if (std::filesystem::equivalent(path_, output_, ec))
      throw UsageError(output_, "output is the input file; use --in-place to modify it");
    check_not_in_place(a);
    notes.cancel_note = "; no output written";
    MappedArray out = make_output(job, chunked_, output_, op.result_dtype(a.dtype(), a.ndim()), &a, a.shape(),
                                  a.order(), common.overwrite);
    context.follow_progress(options, a);
    job.apply(op, a, out, options);
    context.stop_if_cancelled();
    job.commit(out);
    written = output_;
    result_dtype = out.dtype();
    bytes = a.nbytes();
    shape = a.shape();
  }
  const double seconds = seconds_since(start);
  if (common.json) {
    Json j;
    j.begin_object().member("op", op.spec()).member("input", path_).member("output", written);
    j.member("in_place", in_place_);
    if (in_place_) j.member("resumed", resumed);
    j.member("dtype", result_dtype.descr()).key("shape").begin_array();
    for (std::int64_t n : shape) j.integer(n);
    j.end_array().member("bytes", bytes).member("seconds", seconds).end_object();
    std::cout << j.text() << "\n";
  }
  context.report(op.spec() + " " + path_ + " -> " + written + " (" + result_dtype.name() + "): " +
                 rate_text(bytes, seconds));
  return 0;
}

}  // namespace ooc::cli
