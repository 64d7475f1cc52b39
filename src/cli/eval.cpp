// oocrun eval: a numpy expression over named arrays, tile by tile.

#include "cli/commands.hpp"
#include "cli/json.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <new>

namespace ooc::cli {
namespace {

// Results larger than this are written with -o rather than printed.
constexpr std::int64_t kMaxPrintedElements = std::int64_t{1} << 20;

}  // namespace

EvalCommand::EvalCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand("eval", "evaluate a numpy expression over named arrays, tile by tile")) {
  command_->add_option("EXPR", expr_, "expression, e.g. \"2*a + sqrt(b)\" or \"sum(a*b)\"")->required();
  command_->add_option("NAME=ARRAY", bound_, "the arrays the names stand for");
  command_->add_option("-o,--output", output_, "write the result to path.npy or file.h5:/dataset");
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  chunked_.add_options(*command_);
  command_->fallthrough();
}

std::vector<std::string> EvalCommand::shield_expression(const CLI::App& app, std::vector<std::string> args) {
  for (std::size_t i = 1; i + 1 < args.size(); ++i) {
    if (args[i] != "eval") continue;
    std::string& next = args[i + 1];
    // An option of eval's or oocrun's own ("--tile-bytes=64K" by its name) stays one;
    // anything else starting with '-' ("-a * b", "--w") is the expression.
    const std::string name = next.substr(0, next.find('='));
    const bool option = name == "--" || name == "-h" || name == "--help" ||
                        app.get_option_no_throw(name) != nullptr || command_->get_option_no_throw(name) != nullptr;
    if (next.size() > 1 && next[0] == '-' && !option) {
      next.insert(0, " ");  // the expression parser ignores it
      shielded_ = true;
    }
    break;
  }
  return args;
}

int EvalCommand::run(Context& context) const {
  const Job& job = context.job;
  FailureNotes& notes = context.notes;
  notes.file = output_;
  notes.subject = "eval";
  if (!output_.empty()) check_output_name(output_);
  context.refuse_across_ranks("eval");
  const std::string expr = shielded_ && !expr_.empty() && expr_[0] == ' ' ? expr_.substr(1) : expr_;
  // NAME=ARRAY arguments, mapped read-only for as long as the expression runs.
  std::vector<std::string> names;
  std::vector<MappedArray> arrays;
  arrays.reserve(bound_.size());
  for (const std::string& arg : bound_) {
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq == std::string::npos ? 0 : eq);
    const bool identifier = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                            std::all_of(name.begin(), name.end(), [](char c) {
                              return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                            });
    if (eq == std::string::npos || !identifier) throw UsageError("eval: '" + arg + "' is not NAME=ARRAY (as in a=x.npy)");
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw UsageError("eval: the name '" + name + "' is bound twice");
    names.push_back(name);
    arrays.push_back(map_file(arg.substr(eq + 1)));
    check_not_in_place(arrays.back());
    context.describe_reads(arrays.back());
  }
  std::vector<kernels::Binding> bindings;
  for (std::size_t i = 0; i < names.size(); ++i) bindings.push_back({names[i], &arrays[i]});
  const auto expression = kernels::Expression::compile(expr, bindings);
  PipelineOptions options = context.pipeline_options();
  const std::uint64_t asked_tile_bytes = options.tile_bytes;
  for (const MappedArray& a : arrays)  // the sparsest selection sizes the tiles
    options.tile_bytes = std::min(options.tile_bytes, tile_bytes_spanning(a, asked_tile_bytes));
  context.follow_progress(options, expression.dtype().itemsize());
  const auto start = std::chrono::steady_clock::now();
  std::string dtype_name = expression.dtype().name();
  std::optional<Scalar> scalar;    // a reduction's value
  std::vector<std::byte> values;  // or the result's, printed
  Shape shape = expression.shape();
  // An error that comes from the data (an integer to a negative power, max of nothing)
  // names the arrays it was computed from.
  auto inputs = [&] {
    std::string names;
    for (const MappedArray& a : arrays) names += (names.empty() ? "" : ", ") + a.path();
    return names;
  };
  // A cancelled evaluation names its output, or the arrays it reads.
  notes.subject = !output_.empty() ? output_ : !arrays.empty() ? inputs() : "eval";
  if (expression.reduction() && !output_.empty())
    throw UsageError(output_, "eval: a reduction gives one value; drop -o");
  // The output is made before the evaluation: its errors are its own, not the inputs'.
  std::optional<MappedArray> out;
  if (!expression.reduction() && !output_.empty()) {
    for (const MappedArray& a : arrays) {
      std::error_code ec;
      if (std::filesystem::equivalent(a.path(), output_, ec))
        throw UsageError(output_, "eval: the output is one of the inputs");
    }
    notes.cancel_note = "; no output written";
    out.emplace(make_output(job, chunked_, output_, expression.dtype(), nullptr, expression.shape(),
                            expression.order(), context.common.overwrite));
  }
  try {
    if (expression.reduction()) {
      scalar = expression.reduce(options);
      dtype_name = scalar->dtype().name();
      shape = {};
    } else if (out) {
      expression.evaluate(*out, options);
      context.stop_if_cancelled();
      out->commit();
    } else {
      const std::int64_t count = *element_count(expression.shape());
      if (count > kMaxPrintedElements)
        throw UsageError("eval: the result has " + std::to_string(count) +
                         " elements; write it to a file with -o OUT.npy");
      values = expression.evaluate(options);
    }
  } catch (const UsageError&) {
    throw;
  } catch (const Cancelled&) {
    throw;
  } catch (const Error& e) {  // an error of the data with no file named: the inputs'
    if (!e.path().empty() || arrays.empty()) throw;
    throw Error(inputs(), e.problem(), e.kind(), e.option());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    if (arrays.empty()) throw;
    throw Error(inputs(), e.what());
  }
  const double seconds = seconds_since(start);
  if (context.common.json) {
    Json j;
    j.begin_object().member("expr", expr);
    if (scalar) j.member("value", *scalar);
    else if (output_.empty()) j.key("value").array_values(values.data(), expression.dtype(), shape, expression.order());
    else j.member("output", output_);
    j.member("dtype", dtype_name).key("shape").begin_array();
    for (std::int64_t n : shape) j.integer(n);
    j.end_array();
    std::cout << j.member("seconds", seconds).end_object().text() << "\n";
  } else if (scalar) {
    std::cout << scalar->to_string() << "\n";
  } else if (output_.empty()) {
    std::cout << Json(Json::NonFinite::bare).array_values(values.data(), expression.dtype(), shape,
                                                          expression.order()).text()
              << "\n";
  }
  context.report("eval " + expr + ": " + std::to_string(seconds) + " s");
  return 0;
}

}  // namespace ooc::cli
