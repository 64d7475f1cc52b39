// oocrun reduce: a reduction of all elements, or along one axis (--axis), or a histogram.

#include "cli/commands.hpp"
#include "cli/json.hpp"
#include "cli/options.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>

namespace ooc::cli {
namespace {

// Results larger than this are written with -o rather than printed.
constexpr std::int64_t kMaxPrintedElements = std::int64_t{1} << 20;

void shape_json(Json& j, const Shape& shape) {
  j.begin_array();
  for (std::int64_t n : shape) j.integer(n);
  j.end_array();
}

}  // namespace

ReduceCommand::ReduceCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand(
          "reduce",
          "reduce all elements: sum prod mean min max argmin argmax var std count_nonzero any all nansum nanmean "
          "nanmin nanmax norm histogram")) {
  command_->add_option("OP", op_, "reduction")->required();
  command_->add_option("ARRAY", path_, "path.npy or file.h5:/dataset")->required();
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->add_option("--ddof", ddof_, "var, std: delta degrees of freedom (default 0)");
  command_->add_option("--bins", bins_, "histogram: number of equal bins (default 10)");
  command_->add_option("--range", range_, "histogram: LO:HI (default: the data's min and max)");
  command_->add_option("--axis", axis_, "reduce along this axis only (negative: from the end)");
  command_->add_option("-o,--output", output_, "with --axis: write the result to path.npy or file.h5:/dataset");
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  command_->fallthrough();
}

kernels::ReduceOp ReduceCommand::parse_op() const {
  kernels::ReduceParams params;
  params.ddof = ddof_;
  params.bins = bins_;
  if (!range_.empty()) {
    const std::size_t colon = range_.find(':', range_[0] == '-' ? 1 : 0);
    if (colon == std::string::npos) throw UsageError("--range wants LO:HI, not '" + range_ + "'");
    try {
      params.range = {kernels::PyScalar::parse(range_.substr(0, colon)),
                      kernels::PyScalar::parse(range_.substr(colon + 1))};
    } catch (const UsageError& e) {
      throw UsageError("--range: " + e.problem());
    }
  }
  return kernels::ReduceOp::parse(op_, params);
}

int ReduceCommand::run(Context& context) const {
  const Job& job = context.job;
  context.notes.file = context.notes.subject = path_;
  if (!output_.empty()) check_output_name(output_);
  const auto op = parse_op();
  if (axis_) return run_axis(context, op);
  if (!output_.empty()) throw UsageError("reduce -o needs --axis (a full reduction is one value)");
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = job.map_input(path_, Access::read_only, options);
  context.describe_reads(a);
  context.size_tiles_for(a, options);
  check_not_in_place(a);
  context.follow_progress(options, a);
  const auto start = std::chrono::steady_clock::now();
  Json j;  // the object, its value members written as they come
  j.begin_object().member("op", op.name());
  std::string value_text, dtype_name;
  if (op.code() == kernels::ReduceOp::Code::histogram) {
    context.refuse_across_ranks("histogram");
    const kernels::HistogramResult h = op.histogram(a, options);
    // Edges in their dtype (float64, or float16/32 for such data), as numpy gives them.
    auto write_counts = [&](Json& out) {
      out.begin_array();
      for (std::int64_t c : h.counts) out.integer(c);
      out.end_array();
    };
    auto write_edges = [&](Json& out) {
      out.begin_array();
      for (double e : h.edges)
        visit_dtype(h.edge_dtype, [&]<class E>(std::type_identity<E>) {
          E rounded;
          convert(dtype_of<double>, &e, dtype_of<E>, &rounded, 1);
          out.scalar(Scalar::of(rounded));
        });
      out.end_array();
    };
    j.member("counts", write_counts).member("edges", write_edges);
    Json counts(Json::NonFinite::bare), edges(Json::NonFinite::bare);
    write_counts(counts);
    write_edges(edges);
    value_text = counts.text() + "\n" + edges.text();
    dtype_name = h.edge_dtype.name();
  } else {
    const Scalar value = job.reduce(op, a, options);
    j.member("value", value);
    value_text = value.to_string();
    dtype_name = value.dtype().name();
  }
  const double seconds = seconds_since(start);
  using Code = kernels::ReduceOp::Code;
  const bool empty_is_nan = a.size() == 0 && (op.code() == Code::mean || op.code() == Code::nanmean ||
                                              op.code() == Code::var || op.code() == Code::std);
  const std::string warning = op.name() + " of an empty array is nan";  // numpy warns too
  if (context.common.json) {
    j.member("dtype", dtype_name).member("path", path_).member("elements", a.size()).member("bytes", a.nbytes());
    j.member("seconds", seconds);
    if (empty_is_nan) j.member("warning", warning);
    std::cout << j.end_object().text() << "\n";
  } else {
    std::cout << value_text << "\n";
  }
  if (empty_is_nan) context.report(path_ + ": warning: " + warning);
  context.report(op.name() + " of " + path_ + ": " + rate_text(a.nbytes(), seconds));
  return 0;
}

int ReduceCommand::run_axis(Context& context, const kernels::ReduceOp& op) const {
  const Job& job = context.job;
  if (op.code() == kernels::ReduceOp::Code::histogram)
    throw UsageError("histogram takes no --axis (numpy's has none)");
  context.refuse_across_ranks("reduce --axis");
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = job.map_input(path_, Access::read_only, options);
  context.describe_reads(a);
  context.size_tiles_for(a, options);
  check_not_in_place(a);
  int axis = 0;
  try {
    axis = kernels::normalize_axis(*axis_, a.ndim());
  } catch (const UsageError& e) {
    throw UsageError(path_, e.problem());
  }
  const Shape shape = kernels::drop_axis(a.shape(), axis);
  const DType dtype = op.result_dtype(a.dtype());
  const std::int64_t count = *element_count(shape);
  context.follow_progress(options, a.dtype().itemsize());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::byte> values;
  if (!output_.empty()) {
    std::error_code ec;
    if (std::filesystem::equivalent(path_, output_, ec)) throw UsageError(output_, "output is the input file");
    context.notes.cancel_note = "; no output written";
    MappedArray out = create_array(output_, dtype, shape, a.order(), context.common.overwrite);
    op.run_axis(a, axis, out.writable_bytes(), options);
    context.stop_if_cancelled();
    out.commit();
  } else {
    if (count > kMaxPrintedElements)
      throw UsageError(path_, "the result has " + std::to_string(count) +
                                  " elements; write it to a file with -o OUT.npy");
    values.resize(static_cast<std::size_t>(count) * static_cast<std::size_t>(dtype.itemsize()));
    op.run_axis(a, axis, values, options);
  }
  const double seconds = seconds_since(start);
  if (context.common.json) {
    Json j;
    j.begin_object().member("op", op.name()).member("axis", axis);
    if (output_.empty()) j.key("value").array_values(values.data(), dtype, shape, a.order());
    else j.member("output", output_);
    j.member("dtype", dtype.name()).key("shape");
    shape_json(j, shape);
    j.member("path", path_).member("elements", a.size()).member("bytes", a.nbytes()).member("seconds", seconds);
    std::cout << j.end_object().text() << "\n";
  } else if (output_.empty()) {
    std::cout << Json(Json::NonFinite::bare).array_values(values.data(), dtype, shape, a.order()).text() << "\n";
  }
  context.report(op.name() + " along axis " + std::to_string(axis) + " of " + path_ + ": " +
                 rate_text(a.nbytes(), seconds));
  return 0;
}

}  // namespace ooc::cli
