// oocrun linalg: gram, cov and corrcoef of a tall (or, with --rowvar, wide) array, its
// QR (R; Q with -o) and SVD (s and Vt; U with -o), lstsq; oocrun matmul: X @ W, W a
// small array read whole.

#include "cli/commands.hpp"
#include "cli/json.hpp"
#include "cli/options.hpp"
#include "ooc/linalg_qr.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>

namespace ooc::cli {

LinalgCommand::LinalgCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand("linalg", "linear algebra of a tall array, in one pass: gram (X.T @ X), cov, "
                                            "corrcoef, qr (R; Q with -o), svd (s and Vt; U with -o), lstsq")) {
  command_->add_option("OP", op_, "gram, cov, corrcoef, qr, svd or lstsq")->required()->check(CLI::IsMember({"gram", "cov", "corrcoef", "qr", "svd", "lstsq"}));
  command_->add_option("ARRAY", path_, "path.npy or file.h5:/dataset")->required();
  command_->add_option("Y", y_path_, "lstsq: the right-hand side, (N,) or (N, K)");
  command_->add_option("--rcond", rcond_, "lstsq: relative cutoff for small singular values (default eps * max(N, M))");
  command_->add_flag("--rowvar", rowvar_,
                     "cov, corrcoef: each row is a variable, as numpy's default (default here: each column, the "
                     "observations in rows)");
  command_->add_option("-o,--output", output_,
                       "qr: write Q (N x min(N, M)) here, svd: write U, from a second pass (path.npy or "
                       "file.h5:/dataset)");
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  command_->add_option("--ddof", ddof_, "cov: normalise by N - ddof (default: N - 1, or N with --bias)");
  command_->add_flag("--bias", bias_, "cov: normalise by N");
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->fallthrough();
}

int LinalgCommand::run(Context& context) const {
  context.notes.file = context.notes.subject = path_;
  if ((op_ == "gram" || op_ == "qr" || op_ == "svd") && (rowvar_ || ddof_ || bias_))
    throw UsageError(op_ + " takes no --rowvar, --ddof or --bias");
  if (op_ == "corrcoef" && (ddof_ || bias_)) throw UsageError("corrcoef takes no --ddof or --bias (numpy's has no effect)");
  if ((op_ == "lstsq") != !y_path_.empty()) throw UsageError("lstsq, and only lstsq, takes a second array, Y");
  if (op_ != "lstsq" && rcond_) throw UsageError("--rcond goes with lstsq");
  if (!output_.empty() && op_ != "qr" && op_ != "svd") throw UsageError("-o goes with qr (Q) and svd (U)");
  if (!output_.empty()) check_output_name(output_);
  context.refuse_across_ranks("linalg");
  PipelineOptions options = context.pipeline_options();
  const MappedArray a = context.open_to_read(path_, options);
  context.follow_progress(options, a);
  const auto start = std::chrono::steady_clock::now();
  if (op_ == "lstsq") return run_lstsq(context, a, options, start);
  std::error_code ec;
  if (!output_.empty() && std::filesystem::equivalent(path_, output_, ec))
    throw UsageError(output_, "output is an input file");
  if (!output_.empty()) context.notes.cancel_note = "; no output written";
  linalg::Matrix result;
  linalg::SingularValueDecomposition svd;
  if (op_ == "gram") {
    result = linalg::gram(a, options);
  } else if (op_ == "qr") {
    // With -o, Q (and for svd U) from a second pass, into a file committed once complete.
    result = output_.empty() ? linalg::qr_r(a, options) : linalg::qr(a, output_, context.common.overwrite, options);
  } else if (op_ == "svd") {
    svd = output_.empty() ? linalg::svd(a, options) : linalg::svd(a, output_, context.common.overwrite, options);
    result = svd.s;
  } else if (op_ == "cov") {
    linalg::CovOptions how;
    how.rowvar = rowvar_;
    how.bias = bias_;
    how.ddof = ddof_;
    result = linalg::cov(a, how, options);
  } else {
    result = linalg::corrcoef(a, rowvar_, options);
  }
  const double seconds = seconds_since(start);
  const std::vector<std::byte> bytes = result.bytes();
  if (context.common.json) {
    Json j;
    j.begin_object().member("op", op_).key("value").array_values(bytes.data(), result.dtype, result.shape, Order::c);
    j.member("dtype", result.dtype.name()).key("shape").begin_array();
    for (std::int64_t n : result.shape) j.integer(n);
    j.end_array();
    if (op_ == "svd") {
      j.key("s").array_values(bytes.data(), result.dtype, result.shape, Order::c);
      const std::vector<std::byte> vt = svd.vt.bytes();
      j.key("vt").array_values(vt.data(), svd.vt.dtype, svd.vt.shape, Order::c);
    }
    if (!output_.empty()) j.member("output", output_);
    j.member("path", path_).member("bytes", a.nbytes()).member("seconds", seconds);
    if (!result.warnings.empty()) {
      j.key("warnings").begin_array();
      for (const std::string& warning : result.warnings) j.string(warning);
      j.end_array();
    }
    std::cout << j.end_object().text() << "\n";
  } else {
    std::cout << Json(Json::NonFinite::bare).array_values(bytes.data(), result.dtype, result.shape, Order::c).text()
              << "\n";
  }
  for (const std::string& warning : result.warnings) context.report(path_ + ": warning: " + warning);
  context.report(op_ + " of " + path_ + ": " + rate_text(a.nbytes(), seconds));
  return 0;
}

int LinalgCommand::run_lstsq(Context& context, const MappedArray& x, const PipelineOptions& options,
                             std::chrono::steady_clock::time_point start) const {
  const MappedArray y = context.job.map_input(y_path_, Access::read_only, options);
  check_not_in_place(y);
  const linalg::LeastSquares fit = linalg::lstsq(x, y, rcond_, options);
  const double seconds = seconds_since(start);
  auto values = [](Json& j, const linalg::Matrix& m) {
    const std::vector<std::byte> bytes = m.bytes();
    j.array_values(bytes.data(), m.dtype, m.shape, Order::c);
  };
  if (context.common.json) {
    Json j;
    j.begin_object().member("op", "lstsq");
    j.key("x");
    values(j, fit.solution);
    j.key("residuals");
    values(j, fit.residuals);
    j.member("rank", fit.rank).key("singular_values");
    values(j, fit.singular_values);
    j.member("dtype", fit.solution.dtype.name()).member("path", path_).member("seconds", seconds);
    std::cout << j.end_object().text() << "\n";
  } else {
    Json j(Json::NonFinite::bare);
    values(j, fit.solution);
    std::cout << j.text() << "\n";
  }
  context.report("lstsq of " + path_ + ": " + rate_text(x.nbytes() + y.nbytes(), seconds));
  return 0;
}

MatmulCommand::MatmulCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand("matmul", "X @ W, streamed over the rows of X; W is a small array read whole")) {
  command_->add_option("X", x_, "path.npy or file.h5:/dataset, (N, M)")->required();
  command_->add_option("W", w_, "a small array, (M, K) or (M,)")->required();
  command_->add_option("-o,--output", output_, "the result, (N, K): path.npy or file.h5:/dataset")->required();
  command_->add_flag("--overwrite", common.overwrite, "replace an existing HDF5 dataset named by -o");
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->fallthrough();
}

int MatmulCommand::run(Context& context) const {
  context.notes.file = context.notes.subject = x_;
  check_output_name(output_);
  context.refuse_across_ranks("matmul");
  PipelineOptions options = context.pipeline_options();
  const MappedArray x = context.open_to_read(x_, options);
  std::error_code ec;
  if (std::filesystem::equivalent(x_, output_, ec) || std::filesystem::equivalent(w_, output_, ec))
    throw UsageError(output_, "output is an input file");
  const MappedArray w = map_file(w_);
  std::vector<std::byte> weights(static_cast<std::size_t>(w.nbytes()));
  read(w, ElementRange{}, weights);
  const linalg::InMemory in_memory{weights.data(), w.dtype(), w.shape(), w.order()};
  const Shape shape = linalg::matmul_shape(x, w.shape());
  const DType dtype = linalg::matmul_dtype(x.dtype(), w.dtype());
  context.follow_progress(options, x);
  const auto start = std::chrono::steady_clock::now();
  context.notes.cancel_note = "; no output written";
  MappedArray out = create_array(output_, dtype, shape, Order::c, context.common.overwrite);
  linalg::matmul(x, in_memory, out.writable_bytes(), options);
  context.stop_if_cancelled();
  out.commit();
  const double seconds = seconds_since(start);
  if (context.common.json) {
    Json j;
    j.begin_object().member("op", "matmul").member("output", output_).member("dtype", dtype.name()).key("shape");
    j.begin_array();
    for (std::int64_t n : shape) j.integer(n);
    j.end_array().member("path", x_).member("bytes", x.nbytes()).member("seconds", seconds);
    std::cout << j.end_object().text() << "\n";
  }
  context.report("matmul of " + x_ + ": " + rate_text(x.nbytes(), seconds));
  return 0;
}

}  // namespace ooc::cli
