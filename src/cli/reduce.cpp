// oocrun reduce: a reduction of all elements, or along one axis (--axis), or a histogram;
// several of them (OP "sum,mean,std") over one read of the array.

#include "cli/commands.hpp"
#include "cli/json.hpp"
#include "cli/options.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>

namespace ooc::cli {
namespace {

using Code = kernels::ReduceOp::Code;

// Results larger than this are written with -o rather than printed.
constexpr std::int64_t kMaxPrintedElements = std::int64_t{1} << 20;

void shape_json(Json& j, const Shape& shape) {
  j.begin_array();
  for (std::int64_t n : shape) j.integer(n);
  j.end_array();
}

// numpy warns that the mean (var, std) of an empty array is NaN; so does oocrun.
bool empty_is_nan(const kernels::ReduceOp& op, const MappedArray& a) {
  return a.size() == 0 && (op.code() == Code::mean || op.code() == Code::nanmean || op.code() == Code::var ||
                           op.code() == Code::std);
}
std::string nan_warning(const kernels::ReduceOp& op) { return op.name() + " of an empty array is nan"; }

void counts_json(Json& out, const kernels::HistogramResult& h) {
  out.begin_array();
  for (std::int64_t c : h.counts) out.integer(c);
  out.end_array();
}
// Edges in their dtype (float64, or float16/32 for such data), as numpy gives them.
void edges_json(Json& out, const kernels::HistogramResult& h) {
  out.begin_array();
  for (double e : h.edges)
    visit_dtype(h.edge_dtype, [&]<class E>(std::type_identity<E>) {
      E rounded;
      convert(dtype_of<double>, &e, dtype_of<E>, &rounded, 1);
      out.scalar(Scalar::of(rounded));
    });
  out.end_array();
}

// The object `reduce OP ARRAY --json` prints for a full reduction's result.
void full_object(Json& j, const kernels::ReduceOp& op, const kernels::Reduction& result, const MappedArray& a,
                 const std::string& path, double seconds) {
  j.begin_object().member("op", op.name());
  if (const auto* h = std::get_if<kernels::HistogramResult>(&result)) {
    j.member("counts", [&](Json& out) { counts_json(out, *h); }).member("edges", [&](Json& out) { edges_json(out, *h); });
    j.member("dtype", h->edge_dtype.name());
  } else {
    const Scalar& value = std::get<Scalar>(result);
    j.member("value", value).member("dtype", value.dtype().name());
  }
  j.member("path", path).member("elements", a.size()).member("bytes", a.nbytes()).member("seconds", seconds);
  if (empty_is_nan(op, a)) j.member("warning", nan_warning(op));
  j.end_object();
}

// What `reduce OP ARRAY` prints without --json: numpy's text of the value; a histogram's
// counts, then its edges on a line of their own.
std::string full_text(const kernels::Reduction& result) {
  if (const auto* h = std::get_if<kernels::HistogramResult>(&result)) {
    Json counts(Json::NonFinite::bare), edges(Json::NonFinite::bare);
    counts_json(counts, *h);
    edges_json(edges, *h);
    return counts.text() + "\n" + edges.text();
  }
  return std::get<Scalar>(result).to_string();
}

// The object `reduce OP ARRAY --axis K --json` prints: the values (or the output written).
void axis_object(Json& j, const kernels::ReduceOp& op, int axis, const std::byte* values, const std::string& output,
                 DType dtype, const Shape& shape, const MappedArray& a, const std::string& path, double seconds) {
  j.begin_object().member("op", op.name()).member("axis", axis);
  if (output.empty()) j.key("value").array_values(values, dtype, shape, a.order());
  else j.member("output", output);
  j.member("dtype", dtype.name()).key("shape");
  shape_json(j, shape);
  j.member("path", path).member("elements", a.size()).member("bytes", a.nbytes()).member("seconds", seconds);
  j.end_object();
}

// Several results: {"results": {NAME: the object one would print, ...}, then `after`'s
// members (the array, the time, the reads)}.
template <class Object, class After>
std::string several_json(const std::vector<kernels::ReduceOp>& ops, Object&& object, After&& after) {
  Json j;
  j.begin_object().key("results").begin_object();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    j.key(ops[i].name());
    object(j, i);
  }
  j.end_object();
  after(j);
  return j.end_object().text();
}

std::string names_of(const std::vector<kernels::ReduceOp>& ops) {
  std::string names;
  for (const auto& op : ops) names += (names.empty() ? "" : ",") + op.name();
  return names;
}

std::string reads_text(int passes) { return std::to_string(passes) + (passes == 1 ? " read" : " reads"); }

}  // namespace

ReduceCommand::ReduceCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand(
          "reduce",
          "reduce all elements: sum prod mean min max argmin argmax var std count_nonzero any all nansum nanmean "
          "nanmin nanmax norm histogram; several at once, over one read, named with commas: sum,mean,std; or one "
          "order statistic, alone: median nanmedian quantile:Q[,Q...] percentile:P[,P...] nanquantile:Q[,Q...] "
          "nanpercentile:P[,P...]")) {
  command_->add_option("OP", op_, "reduction, or several separated by commas")->required();
  command_->add_option("ARRAY", path_, "path.npy or file.h5:/dataset")->required();
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->add_option("--ddof", ddof_, "var, std: delta degrees of freedom (default 0)");
  command_->add_option("--bins", bins_, "histogram: number of equal bins (default 10)");
  command_->add_option("--range", range_, "histogram: LO:HI (default: the data's min and max)");
  command_->add_option("--axis", axis_, "reduce along this axis only (negative: from the end)");
  command_->add_option("--method", method_, "quantile, percentile: linear (default), lower, higher, nearest, midpoint");
  command_->add_option("-o,--output", output_, "with --axis and one OP: write the result to path.npy or file.h5:/dataset");
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  command_->fallthrough();
}

std::vector<kernels::ReduceOp> ReduceCommand::parse_ops() const {
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
  std::vector<kernels::ReduceOp> ops;
  std::set<std::string> named;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = op_.find(',', begin);
    const std::string name = op_.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    ops.push_back(kernels::ReduceOp::parse(name, params));
    // Each result is a member named by its operation: a name twice would be two members of one name.
    if (!named.insert(name).second) throw UsageError("reduce: '" + name + "' is named twice in '" + op_ + "'");
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return ops;
}

int ReduceCommand::run(Context& context) const {
  const Job& job = context.job;
  context.notes.file = context.notes.subject = path_;
  if (!output_.empty()) check_output_name(output_);
  if (names_order_statistic(op_)) return run_order(context);
  const auto ops = parse_ops();
  if (ops.size() > 1) return run_several(context, ops);
  const kernels::ReduceOp& op = ops.front();
  if (axis_) return run_axis(context, op);
  if (!output_.empty()) throw UsageError("reduce -o needs --axis (a full reduction is one value)");
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = context.open_to_read(path_, options);
  context.follow_progress(options, a);
  const auto start = std::chrono::steady_clock::now();
  kernels::Reduction result = Scalar::of(false);
  if (op.code() == Code::histogram) {
    context.refuse_across_ranks("histogram");
    result = op.histogram(a, options);
  } else {
    result = job.reduce(op, a, options);
  }
  const double seconds = seconds_since(start);
  if (context.common.json) {
    Json j;
    full_object(j, op, result, a, path_, seconds);
    std::cout << j.text() << "\n";
  } else {
    std::cout << full_text(result) << "\n";
  }
  if (empty_is_nan(op, a)) context.report(path_ + ": warning: " + nan_warning(op));
  context.report(op.name() + " of " + path_ + ": " + rate_text(a.nbytes(), seconds));
  return 0;
}

int ReduceCommand::run_axis(Context& context, const kernels::ReduceOp& op) const {
  if (op.code() == Code::histogram) throw UsageError("histogram takes no --axis (numpy's has none)");
  context.refuse_across_ranks("reduce --axis");
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = context.open_to_read(path_, options);
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
    axis_object(j, op, axis, values.data(), output_, dtype, shape, a, path_, seconds);
    std::cout << j.text() << "\n";
  } else if (output_.empty()) {
    std::cout << Json(Json::NonFinite::bare).array_values(values.data(), dtype, shape, a.order()).text() << "\n";
  }
  context.report(op.name() + " along axis " + std::to_string(axis) + " of " + path_ + ": " +
                 rate_text(a.nbytes(), seconds));
  return 0;
}

int ReduceCommand::run_several(Context& context, const std::vector<kernels::ReduceOp>& ops) const {
  // One output file cannot hold several results, and one result each from one run would
  // be a run per file: refused rather than guessed (print them with --json instead).
  if (!output_.empty())
    throw UsageError("reduce -o takes one operation, not '" + op_ + "' (several print their values, --json)");
  context.refuse_across_ranks("reduce of several operations");
  if (axis_) return run_several_axis(context, ops);
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = context.open_to_read(path_, options);
  context.follow_progress(options, a);
  const auto start = std::chrono::steady_clock::now();
  const Reductions results = reduce_together(a, ops, options);
  const double seconds = seconds_since(start);
  if (context.common.json) {
    const auto object = [&](Json& j, std::size_t i) { full_object(j, ops[i], results.values[i], a, path_, seconds); };
    std::cout << several_json(ops, object, [&](Json& j) {
      j.member("path", path_).member("elements", a.size()).member("bytes", a.nbytes()).member("seconds", seconds);
      j.member("passes", results.passes);
    }) << "\n";
  } else {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      std::string text = full_text(results.values[i]);
      if (ops[i].code() == Code::histogram) text.replace(text.find('\n'), 1, " ");  // one line per operation
      std::cout << ops[i].name() << ": " << text << "\n";
    }
  }
  for (const auto& op : ops)
    if (empty_is_nan(op, a)) context.report(path_ + ": warning: " + nan_warning(op));
  context.report(names_of(ops) + " of " + path_ + ": " + rate_text(a.nbytes(), seconds) + ", " +
                 reads_text(results.passes));
  return 0;
}

int ReduceCommand::run_several_axis(Context& context, const std::vector<kernels::ReduceOp>& ops) const {
  for (const auto& op : ops)
    if (op.code() == Code::histogram) throw UsageError("histogram takes no --axis (numpy's has none)");
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = context.open_to_read(path_, options);
  int axis = 0;
  try {
    axis = kernels::normalize_axis(*axis_, a.ndim());
  } catch (const UsageError& e) {
    throw UsageError(path_, e.problem());
  }
  const std::int64_t count = *element_count(kernels::drop_axis(a.shape(), axis));
  if (count > kMaxPrintedElements)
    throw UsageError(path_, "the result has " + std::to_string(count) +
                                " elements; write it to a file with -o OUT.npy, one operation at a time");
  context.follow_progress(options, a.dtype().itemsize());
  const auto start = std::chrono::steady_clock::now();
  const AxisReductions results = reduce_axis_together(a, axis, ops, options);
  const double seconds = seconds_since(start);
  if (context.common.json) {
    const auto object = [&](Json& j, std::size_t i) {
      const ReducedArray& r = results.arrays[i];
      axis_object(j, ops[i], axis, r.bytes.data(), "", r.dtype, r.shape, a, path_, seconds);
    };
    std::cout << several_json(ops, object, [&](Json& j) {
      j.member("axis", axis).member("path", path_).member("elements", a.size()).member("bytes", a.nbytes());
      j.member("seconds", seconds).member("passes", results.passes);
    }) << "\n";
  } else {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const ReducedArray& r = results.arrays[i];
      std::cout << ops[i].name() << ": "
                << Json(Json::NonFinite::bare).array_values(r.bytes.data(), r.dtype, r.shape, r.order).text() << "\n";
    }
  }
  context.report(names_of(ops) + " along axis " + std::to_string(axis) + " of " + path_ + ": " +
                 rate_text(a.nbytes(), seconds) + ", " + reads_text(results.passes));
  return 0;
}

}  // namespace ooc::cli
