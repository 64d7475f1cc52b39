#pragma once
// oocrun import / oocrun export: text files in and out (ooc::import_text, ooc::export_text).

#include "cli/context.hpp"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace ooc::cli {

class TextCommands {
 public:
  /// Adds the two subcommands to `app`.
  explicit TextCommands(CLI::App& app);
  ~TextCommands();
  bool parsed() const;
  /// Runs the one that was parsed; returns the exit status (errors are thrown).
  int run(Context& context) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ooc::cli
