// oocrun reduce median|quantile:Q[,Q...]|percentile:P[,P...]|nanmedian|nanquantile:Q|
// nanpercentile:P: numpy's order statistics by ooc::quantile's radix select; and oocrun
// unique ARRAY [--counts] [-o OUT]: np.unique by ooc::unique's hash tables.
//
// OP's commas: an order statistic is computed alone, so every comma after its name
// separates its q values (quantile:0.1,0.9 is one operation at two q); naming another
// operation with it is refused rather than read as a q.

#include "cli/commands.hpp"
#include "cli/json.hpp"
#include "cli/options.hpp"
#include "ooc/array_path.hpp"
#include "ooc/order.hpp"

#include <chrono>
#include <filesystem>
#include <cstdlib>
#include <iostream>

namespace ooc::cli {
namespace {

struct OrderOp {
  std::string name;        // median, quantile, percentile, nanmedian, ...
  std::vector<double> q;   // as given (percentiles in [0, 100])
  bool scalar_q = true;    // one q: the result has no q axis
  QuantileSpec spec;
};

constexpr const char* kOrderNames[] = {"median", "nanmedian", "quantile", "percentile", "nanquantile", "nanpercentile"};

std::string head_of(const std::string& op) {
  return op.substr(0, std::min(op.find(':'), op.find(',')));
}

bool is_order_name(const std::string& name) {
  for (const char* known : kOrderNames)
    if (name == known) return true;
  return false;
}

double parse_q(const std::string& text, const std::string& op) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw UsageError("reduce: '" + text + "' in '" + op + "' is not a number (order statistics are computed alone: " +
                     "reduce " + head_of(op) + ":Q[,Q...] ARRAY)");
  return value;
}

OrderOp parse_order(const std::string& op, const std::string& method) {
  OrderOp parsed;
  parsed.name = head_of(op);
  const bool median = parsed.name == "median" || parsed.name == "nanmedian";
  const bool percent = parsed.name.ends_with("percentile");
  parsed.spec.median = median;
  parsed.spec.skip_nan = parsed.name.starts_with("nan");
  try {
    parsed.spec.method = parse_quantile_method(method);
  } catch (const Error& e) {
    throw UsageError("--method: " + e.problem());
  }
  const std::size_t colon = op.find(':');
  if (median) {
    if (op != parsed.name)
      throw UsageError("reduce: " + parsed.name + " takes no values and is computed alone, not '" + op + "'");
    return parsed;
  }
  if (colon == std::string::npos || colon + 1 == op.size())
    throw UsageError("reduce: " + parsed.name + " needs its " + (percent ? "percentiles" : "quantiles") + ": " +
                     parsed.name + (percent ? ":P[,P...]" : ":Q[,Q...]"));
  for (std::size_t begin = colon + 1;;) {
    const std::size_t comma = op.find(',', begin);
    const std::string item = op.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (is_order_name(head_of(item)) || item.find(':') != std::string::npos)
      throw UsageError("reduce: " + parsed.name + " is computed alone; run reduce once per order statistic, not '" +
                       op + "'");
    parsed.q.push_back(parse_q(item, op));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  parsed.scalar_q = parsed.spec.scalar_q = parsed.q.size() == 1;
  for (double q : parsed.q) {
    const double fraction = percent ? q / 100 : q;
    if (!(fraction >= 0 && fraction <= 1))
      throw UsageError(std::string("reduce: ") + (percent ? "Percentiles must be in the range [0, 100]"
                                                          : "Quantiles must be in the range [0, 1]"));
    parsed.spec.q.push_back(fraction);
  }
  return parsed;
}

Scalar scalar_at(const std::byte* bytes, DType dtype) {
  return visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    return Scalar::of(value);
  });
}

}  // namespace

bool ReduceCommand::names_order_statistic(const std::string& op) {
  if (is_order_name(head_of(op))) return true;
  // An order statistic named after other operations: refused with its reason, not "unknown".
  for (std::size_t begin = op.find(','); begin != std::string::npos; begin = op.find(',', begin + 1))
    if (is_order_name(head_of(op.substr(begin + 1))))
      throw UsageError("reduce: " + head_of(op.substr(begin + 1)) +
                       " is computed alone, not with other operations ('" + op + "')");
  return false;
}

int ReduceCommand::run_order(Context& context) const {
  const OrderOp op = parse_order(op_, method_);
  if (!output_.empty()) throw UsageError("reduce -o does not take " + op.name + " (its values are printed)");
  context.refuse_across_ranks("reduce " + op.name);
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = context.open_to_read(path_, options);
  context.follow_progress(options, a);
  const auto start = std::chrono::steady_clock::now();
  QuantileResult result = quantile(a, op.spec, axis_, options);
  const double seconds = seconds_since(start);
  Shape shape = result.shape;
  if (!op.spec.median && op.scalar_q) shape.erase(shape.begin());
  const bool one_value = shape.empty();
  std::string warning;
  if (result.all_nan_slices > 0) warning = "All-NaN slice encountered";
  else if (result.empty_slices > 0) warning = "Mean of empty slice";
  if (context.common.json) {
    Json j;
    j.begin_object().member("op", op.name);
    if (!op.spec.median) {
      j.key("q").begin_array();
      for (double q : op.q) j.scalar(Scalar::of(q));
      j.end_array();
      j.member("method", quantile_method_name(op.spec.method));
    }
    if (axis_) j.member("axis", *axis_);
    if (one_value) j.member("value", scalar_at(result.bytes.data(), result.dtype));
    else j.key("value").array_values(result.bytes.data(), result.dtype, shape, Order::c);
    j.member("dtype", result.dtype.name()).key("shape").begin_array();
    for (std::int64_t n : shape) j.integer(n);
    j.end_array();
    j.member("path", path_).member("elements", a.size()).member("bytes", a.nbytes()).member("seconds", seconds);
    j.member("passes", result.passes);
    if (!warning.empty()) j.member("warning", warning);
    std::cout << j.end_object().text() << "\n";
  } else if (one_value) {
    std::cout << scalar_at(result.bytes.data(), result.dtype).to_string() << "\n";
  } else {
    std::cout << Json(Json::NonFinite::bare).array_values(result.bytes.data(), result.dtype, shape, Order::c).text()
              << "\n";
  }
  if (!warning.empty()) context.report(path_ + ": warning: " + warning);
  context.report(op.name + " of " + path_ + ": " + rate_text(a.nbytes(), seconds) + ", " +
                 std::to_string(result.passes) + (result.passes == 1 ? " read" : " reads"));
  return 0;
}

UniqueCommand::UniqueCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand("unique", "np.unique of the flattened array (NaNs as one): one read by hash tables; "
                                            "with -o, more distinct values than memory holds are sorted first")) {
  command_->add_option("ARRAY", path_, "path.npy or file.h5:/dataset")->required();
  command_->add_option("--memory", memory_, "memory the tables (and, with -o, the sort) may take, e.g. 256M (default)");
  command_->add_flag("--counts", counts_, "also each value's count (np.unique(a, return_counts=True))");
  command_->add_option("-o,--output", output_, "write the values to path.npy or file.h5:/dataset (1-d)");
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->fallthrough();
}

// More values (or counts) than this are not printed.
constexpr std::int64_t kMostPrinted = std::int64_t{1} << 20;

int UniqueCommand::run(Context& context) const {
  context.notes.file = context.notes.subject = path_;
  if (!output_.empty()) check_output_name(output_);
  context.refuse_across_ranks("unique");
  const std::uint64_t budget = memory_option(memory_);
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = context.open_to_read(path_, options);
  context.follow_progress(options, a);
  const auto start = std::chrono::steady_clock::now();
  // With -o, any number of distinct values (sorted when the tables cannot hold them);
  // printed, they must fit the tables.
  UniqueResult result;
  bool sorted = false;
  std::int64_t distinct = 0;
  if (!output_.empty()) {
    std::error_code ec;
    if (std::filesystem::equivalent(path_, output_, ec)) throw UsageError(output_, "output is the input file");
    context.notes.cancel_note = "; no output written";
    SortSpec how;
    how.memory_budget = budget;
    how.temp_dir = std::filesystem::absolute(ArrayPath::parse(output_).file).parent_path().string();
    UniqueToResult written = unique_to(
        a, [&](std::int64_t distinct) { return create_array(output_, a.dtype().native(), Shape{distinct}, Order::c,
                                                            context.common.overwrite); },
        counts_, how, options);
    if (counts_ && written.distinct > kMostPrinted)
      throw UsageError(path_, "unique: the counts of " + std::to_string(written.distinct) +
                                  " distinct values are too many to print; run without --counts (no output written)");
    context.stop_if_cancelled();
    written.output->commit();
    result.counts = std::move(written.counts);
    distinct = written.distinct;
    result.dtype = a.dtype().native();
    result.passes = written.reads;
    sorted = written.sorted;
  } else {
    result = unique(a, budget, options);
    distinct = static_cast<std::int64_t>(result.counts.size());
  }
  const Shape shape{distinct};
  const bool print_values = output_.empty();
  const bool printed = print_values || counts_;
  if (printed && distinct > kMostPrinted)
    throw UsageError(path_, "unique: " + std::to_string(distinct) + " distinct values are too many to print; write them "
                            "with -o OUT.npy" + (counts_ ? " (without --counts)" : ""));
  const double seconds = seconds_since(start);
  auto counts_json = [&](Json& j) {
    j.begin_array();
    for (std::int64_t c : result.counts) j.integer(c);
    j.end_array();
  };
  if (context.common.json) {
    Json j;
    j.begin_object().member("op", "unique").member("distinct", distinct).member("dtype", result.dtype.name());
    if (print_values) j.key("values").array_values(result.values.data(), result.dtype, shape, Order::c);
    else j.member("output", output_);
    if (counts_) j.member("counts", counts_json);
    j.member("path", path_).member("elements", a.size()).member("bytes", a.nbytes()).member("seconds", seconds);
    j.member("passes", result.passes).member("sorted", sorted);
    std::cout << j.end_object().text() << "\n";
  } else {
    if (print_values)
      std::cout << Json(Json::NonFinite::bare).array_values(result.values.data(), result.dtype, shape, Order::c).text()
                << "\n";
    if (counts_) {
      Json j;
      counts_json(j);
      std::cout << j.text() << "\n";
    }
  }
  context.report("unique of " + path_ + ": " + std::to_string(distinct) + " distinct values, " +
                 rate_text(a.nbytes(), seconds));
  return 0;
}

}  // namespace ooc::cli
