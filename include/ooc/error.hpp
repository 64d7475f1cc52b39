#pragma once
/// Errors that name the file and the problem.
///
/// What crosses ooc's public API (every function in include/ooc/, and the Python module):
///
/// - ooc::Error: a run-time failure: a file that cannot be opened, read, written or
///   parsed, a value the data cannot give (numpy's "zero-size array to reduction
///   operation ..."), an exception a kernel threw (the pipeline rethrows it as an Error
///   naming the file: rethrow_naming in kernel.hpp), or memory that ran out inside a
///   kernel ("FILE: out of memory").
/// - ooc::UsageError (an Error): the caller asked for something that cannot be done as
///   asked: an unknown operation or dtype, a constant or size that does not parse,
///   incompatible shapes, an output that is the input. The leaves that parse text
///   (DType::from_numpy and from_name, kernels::PyScalar::parse, cli::parse_size) and
///   TilePlan::share throw it with no file; a caller that knows the file or the option
///   the text came from says so in the error it throws.
/// - ooc::Cancelled (an Error): a run stopped because PipelineOptions::cancel was set.
/// - std::bad_alloc: memory that ran out outside a kernel (a plan, a printed result).
/// - std::logic_error: a bug in ooc (or a kernel that breaks its contract), never bad input.
/// - std::domain_error, only from kernel building blocks called directly
///   (kernels::run_loop for an integer to a negative power, a reduction kernel's result()
///   for max of nothing): ooc::reduce, transform and Expression turn it into an Error as
///   above.
///
/// An Error with a file reads "FILE: PROBLEM" (what()); one that concerns no file, made
/// with the one-argument constructor, has an empty path() and reads "PROBLEM".
///
/// The command line (oocrun) prints what() on one line after "oocrun: " and exits 2 for a
/// UsageError, 128 + the signal for Cancelled, and 1 for anything else. The Python module
/// raises ValueError for a UsageError, KeyboardInterrupt for Cancelled, and for other
/// Errors ooc.Error (an OSError), except FileNotFoundError and PermissionError where the
/// operating system's cause says so, and ValueError for numpy's own refusals of an empty
/// array; std::bad_alloc becomes MemoryError.

#include <stdexcept>
#include <string>

namespace ooc {

/// A run-time failure, tied to a file where one is known.
class Error : public std::runtime_error {
 public:
  /// what() reads "FILE: PROBLEM" (or PROBLEM, if `path` is empty).
  Error(std::string path, std::string problem);
  /// A problem that concerns no file: what() is `problem`, path() is empty.
  explicit Error(std::string problem) : Error(std::string(), std::move(problem)) {}

  const std::string& path() const noexcept { return path_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string path_;
  std::string problem_;
};

/// The caller asked for something that cannot be done as asked (bad operation,
/// incompatible shapes, in-place with a dtype change); the command line maps it to exit 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A run stopped because PipelineOptions::cancel was set (Ctrl-C in oocrun).
class Cancelled : public Error {
 public:
  using Error::Error;
};

}  // namespace ooc
