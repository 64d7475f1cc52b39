#pragma once
// oocrun import / oocrun export: text files in and out (ooc::import_text, ooc::export_text).

#include "ooc/pipeline.hpp"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace ooc::cli {

class TextCommands {
 public:
  /// Adds the two subcommands to `app`; their input and output land in `input` and
  /// `output` (oocrun's own path variables, named in its messages).
  TextCommands(CLI::App& app, std::string& input, std::string& output);
  ~TextCommands();
  bool parsed() const;
  /// Whether `import` was parsed: its output is an array, named as apply's is.
  bool importing() const;
  /// Runs the one that was parsed; returns the exit status (errors are thrown).
  int run(const PipelineOptions& options, bool progress, bool quiet);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ooc::cli
