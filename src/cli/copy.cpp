// oocrun copy: an array, or a selection of one, into a new file, as np.save(OUT, ARRAY)
// writes it: .npy to HDF5 and back, compressed or not.

#include "cli/commands.hpp"
#include "cli/json.hpp"
#include "cli/options.hpp"

#include "ooc/array_path.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>

namespace ooc::cli {
namespace {

// "/a//b/" -> "/a/b": the names HDF5 takes for one dataset.
std::string dataset_name(const std::string& dataset) {
  std::string name;
  for (char c : dataset)
    if (c != '/' || name.empty() || name.back() != '/') name += c;
  if (name.size() > 1 && name.back() == '/') name.pop_back();
  return name.empty() || name[0] != '/' ? "/" + name : name;
}

// A copy onto the array it reads is refused before anything is made.
void refuse_copy_onto_input(const std::string& input, const std::string& output) {
  const ArrayPath in = ArrayPath::parse(input);
  const ArrayPath out = ArrayPath::parse(output);
  std::error_code ec;
  // Through any name of the file: itself, a hard link, a symbolic link to it.
  if (!std::filesystem::equivalent(in.file, out.file, ec)) return;
  // Another dataset of the HDF5 file the input is read from is a new array, as for apply.
  if (in.in_hdf5() && out.in_hdf5() && dataset_name(in.dataset) != dataset_name(out.dataset)) return;
  throw UsageError(output, "copy: the output is the input " + input + " (copy writes a new array)");
}

}  // namespace

CopyCommand::CopyCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand("copy",
                                  "write an array or a selection of one to a new .npy file or HDF5 dataset (convert, "
                                  "compress, decompress), as np.save(OUT, ARRAY) writes it")) {
  command_->add_option("ARRAY", path_, "input: path.npy or file.h5:/dataset, with a selection if any")->required();
  command_->add_option("-o,--output", output_, "output: path.npy or file.h5:/dataset")->required();
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  chunked_.add_options(*command_);
  command_->fallthrough();
}

int CopyCommand::run(Context& context) const {
  const Job& job = context.job;
  FailureNotes& notes = context.notes;
  notes.file = notes.subject = path_;
  check_output_name(output_);
  refuse_copy_onto_input(path_, output_);
  PipelineOptions options = context.pipeline_options();
  const auto start = std::chrono::steady_clock::now();
  const MappedArray a = context.open_to_read(path_, options);
  notes.cancel_note = "; no output written";
  // The same dtype, byte order included, as np.save keeps it; astype to it is a copy
  // (bools stored as 0 and 1, as every ooc output stores them).
  const auto op = kernels::ElementwiseOp::parse("cast:" + a.dtype().descr());
  MappedArray out = make_output(job, chunked_, output_, a.dtype(), &a, a.shape(), a.order(), context.common.overwrite);
  context.follow_progress(options, a);
  job.apply(op, a, out, options);
  context.stop_if_cancelled();
  job.commit(out);
  const double seconds = seconds_since(start);
  if (context.common.json) {
    Json j;
    j.begin_object().member("op", "copy").member("input", path_).member("output", output_);
    j.member("dtype", a.dtype().descr()).key("shape").begin_array();
    for (std::int64_t n : a.shape()) j.integer(n);
    j.end_array().member("bytes", a.nbytes()).member("seconds", seconds).end_object();
    std::cout << j.text() << "\n";
  }
  context.report("copy " + path_ + " -> " + output_ + " (" + a.dtype().name() + "): " + rate_text(a.nbytes(), seconds));
  return 0;
}

}  // namespace ooc::cli
