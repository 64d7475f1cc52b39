#pragma once
// oocrun's subcommands, one file each (info.cpp, apply.cpp, reduce.cpp, eval.cpp; import
// and export in text.cpp). Each adds its subcommand and options to the app, and run()s
// when it was the one parsed: it returns the exit status and throws errors (fail() in
// context.cpp prints them).

#include "cli/context.hpp"
#include "cli/output.hpp"

#include <CLI/CLI.hpp>

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

class ReduceCommand {
 public:
  ReduceCommand(CLI::App& app, Common& common);
  bool parsed() const { return command_->parsed(); }
  int run(Context& context) const;

 private:
  kernels::ReduceOp parse_op() const;
  int run_axis(Context& context, const kernels::ReduceOp& op) const;

  CLI::App* command_;
  std::string op_, path_, range_, output_;  // range_: "LO:HI"
  std::int64_t ddof_ = 0;
  std::int64_t bins_ = 10;
  std::optional<int> axis_;
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

}  // namespace ooc::cli
