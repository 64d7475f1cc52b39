#pragma once
// oocrun's subcommands, one file each (info.cpp, apply.cpp, copy.cpp, reduce.cpp, eval.cpp; import
// and export in text.cpp). Each adds its subcommand and options to the app, and run()s
// when it was the one parsed: it returns the exit status and throws errors (fail() in
// context.cpp prints them).

#include "cli/context.hpp"
#include "cli/output.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ooc::cli {

class InfoCommand {
 public:
  InfoCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  int run(Context& context) const;

 private:
  CLI::App* command_;
  std::string path_;
};

class ApplyCommand {
 public:
  ApplyCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  /// After parsing: one of -o and --in-place (throws CLI::ValidationError).
  void validate() const;
  int run(Context& context) const;

 private:
  CLI::App* command_;
  std::string op_, path_, output_;
  bool in_place_ = false;
  bool no_journal_ = false;
  ChunkedOutput chunked_;
};

class CopyCommand {
 public:
  CopyCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  int run(Context& context) const;

 private:
  CLI::App* command_;
  std::string path_, output_;
  ChunkedOutput chunked_;
};

class ReduceCommand {
 public:
  ReduceCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  int run(Context& context) const;

 private:
  /// OP's reductions: one, or several named with commas ("sum,mean,std").
  std::vector<kernels::ReduceOp> parse_ops() const;
  int run_axis(Context& context, const kernels::ReduceOp& op) const;
  /// Several reductions over one read: {"results": {NAME: the object one would print}}.
  int run_several(Context& context, const std::vector<kernels::ReduceOp>& ops) const;
  int run_several_axis(Context& context, const std::vector<kernels::ReduceOp>& ops) const;
  /// median, quantile:Q[,Q...] and the other order statistics (reduce_order.cpp).
  static bool names_order_statistic(const std::string& op);
  int run_order(Context& context) const;

  CLI::App* command_;
  std::string op_, path_, range_, output_;  // range_: "LO:HI"
  std::string method_ = "linear";
  std::int64_t ddof_ = 0;
  std::int64_t bins_ = 10;
  std::optional<int> axis_;
};

/// oocrun unique ARRAY [--counts] [-o OUT] [--json] (reduce_order.cpp).
class UniqueCommand {
 public:
  UniqueCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  int run(Context& context) const;

 private:
  CLI::App* command_;
  std::string path_, output_, memory_ = "256M";
  bool counts_ = false;
};

/// oocrun sort|argsort ARRAY -o OUT [--axis K|none] [--temp-dir DIR] (sort.cpp).
class SortCommand {
 public:
  SortCommand(CLI::App& app, Common& common, bool indices);
  bool parsed() const { return command_->parsed(); }
  int run(Context& context) const;

 private:
  CLI::App* command_;
  bool indices_;
  std::string path_, output_, axis_ = "-1", temp_dir_, memory_ = "256M";
  ChunkedOutput chunked_;
};

class EvalCommand {
 public:
  EvalCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  /// oocrun's arguments with an expression that starts with '-' ("-a * b") shielded by a
  /// leading space, which keeps CLI11 from reading it as an option; run() drops it.
  std::vector<std::string> shield_expression(const CLI::App& app, std::vector<std::string> args);
  int run(Context& context) const;

 private:
  CLI::App* command_;
  std::string expr_, output_;
  std::vector<std::string> bound_;  // NAME=ARRAY
  bool shielded_ = false;
  ChunkedOutput chunked_;
};

class LinalgCommand {
 public:
  LinalgCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  int run(Context& context) const;

 private:
  int run_lstsq(Context& context, const MappedArray& x, const PipelineOptions& options,
                std::chrono::steady_clock::time_point start) const;

  CLI::App* command_;
  std::string op_, path_, y_path_;  // y_path_: lstsq's Y
  std::string output_;              // qr: Q, svd: U
  std::optional<double> rcond_;
  bool rowvar_ = false;
  bool bias_ = false;
  std::optional<std::int64_t> ddof_;
};

class MatmulCommand {
 public:
  MatmulCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  int run(Context& context) const;

 private:
  CLI::App* command_;
  std::string x_, w_, output_;
};

}  // namespace ooc::cli
