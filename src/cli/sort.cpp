// oocrun sort|argsort ARRAY -o OUT [--axis K|none]: np.sort(a, axis, kind='stable') and
// np.argsort into a new file, by ooc::sort (runs sorted on every core, merged once).

#include "cli/commands.hpp"
#include "cli/json.hpp"
#include "cli/options.hpp"
#include "ooc/order.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>

namespace ooc::cli {
namespace {

std::optional<int> parse_axis(const std::string& text) {
  if (text == "none" || text == "None") return std::nullopt;
  try {
    std::size_t used = 0;
    const int axis = std::stoi(text, &used);
    if (used == text.size()) return axis;
  } catch (const std::exception&) {
  }
  throw UsageError("--axis must be an integer or 'none', not '" + text + "'");
}

}  // namespace

SortCommand::SortCommand(CLI::App& app, Common& common, bool indices)
    : command_(app.add_subcommand(indices ? "argsort" : "sort",
                                  indices ? "np.argsort(ARRAY, axis, kind='stable') into a new int64 file"
                                          : "np.sort(ARRAY, axis, kind='stable') into a new file: NaNs last, "
                                            "larger than memory sorted in runs merged once")),
      indices_(indices) {
  command_->add_option("ARRAY", path_, "input: path.npy, file.h5:/dataset or x.zarr, with a selection if any")->required();
  command_->add_option("-o,--output", output_, "output: path.npy, file.h5:/dataset or x.zarr")->required();
  command_->add_option("--axis", axis_, "the axis to sort along (negative: from the end; 'none': the flattened "
                                        "array, as numpy's axis=None); default -1");
  command_->add_option("--temp-dir", temp_dir_, "directory for the sorted runs (default: the output's)");
  command_->add_option("--memory", memory_, "memory the sort may take, e.g. 256M (default) or 2G");
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  command_->add_flag("--json", common.json, kJsonHelp);
  chunked_.add_options(*command_);
  command_->fallthrough();
}

int SortCommand::run(Context& context) const {
  const std::string name = indices_ ? "argsort" : "sort";
  context.notes.file = context.notes.subject = path_;
  check_output_name(output_);
  context.refuse_across_ranks(name);
  SortSpec spec;
  spec.indices = indices_;
  spec.axis = parse_axis(axis_);
  spec.temp_dir = temp_dir_;
  spec.memory_budget = memory_option(memory_);
  if (!temp_dir_.empty() && !std::filesystem::is_directory(temp_dir_))
    throw Error(temp_dir_, "--temp-dir: not a directory", ErrorKind::not_found, "--temp-dir");
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = context.open_to_read(path_, options);
  std::error_code ec;
  if (std::filesystem::equivalent(ArrayPath::parse(path_).file, ArrayPath::parse(output_).file, ec) &&
      !ArrayPath::parse(output_).in_hdf5())
    throw UsageError(output_, name + ": the output is the input " + path_ + " (sort writes a new array)");
  const Shape shape = sort_shape(a, spec);
  const DType dtype = sort_dtype(a, spec);
  context.notes.cancel_note = "; no output written";
  MappedArray out = make_output(context.job, chunked_, output_, dtype, nullptr, shape, a.order(), context.common.overwrite);
  const auto start = std::chrono::steady_clock::now();
  const SortResult result = sort(a, out, spec, options);
  context.stop_if_cancelled();
  context.job.commit(out);
  const double seconds = seconds_since(start);
  if (context.common.json) {
    Json j;
    j.begin_object().member("op", name).member("input", path_).member("output", output_);
    if (spec.axis) j.member("axis", *spec.axis);
    else j.key("axis").null();
    j.member("dtype", dtype.descr()).key("shape").begin_array();
    for (std::int64_t n : shape) j.integer(n);
    j.end_array().member("bytes", a.nbytes()).member("seconds", seconds).member("runs", result.runs);
    j.member("run_bytes", result.run_bytes).member("merge_parts", result.merge_parts);
    j.member("reads", result.reads).end_object();
    std::cout << j.text() << "\n";
  }
  context.report(name + " " + path_ + " -> " + output_ + ": " + rate_text(a.nbytes(), seconds) +
                 (result.runs > 0 ? ", " + std::to_string(result.runs) + " runs merged" : ""));
  return 0;
}

}  // namespace ooc::cli
