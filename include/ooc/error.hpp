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
///   (DType::from_numpy and from_name, kernels::PyScalar::parse, ooc::parse_size) and
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
/// Every Error carries a kind (ErrorKind: not found, permission, no space, corrupt,
/// busy, ...), set where the library knows the cause, so that a caller picks its reaction
/// (or its language's exception type) from kind(), never from the message's words.
///
/// Messages speak the API's terms, never a front end's: an Error whose fix is one of the
/// caller's options (or that is about one) names it as the API does ("dataset already
/// exists (overwrite replaces it)", "tile_bytes must be positive") and says which words
/// those are (option()), so that oocrun can say its flag there instead ("--overwrite").
///
/// The command line (oocrun) prints what() on one line after "oocrun: " (with its flag
/// for option()) and exits 2 for a UsageError, 128 + the signal for Cancelled, and 1 for
/// anything else. The Python module picks the exception by kind(): ValueError for usage
/// and value, IndexError for index, KeyboardInterrupt for cancelled, FileNotFoundError for not_found,
/// PermissionError for permission, MemoryError for out_of_memory, and ooc.Error (an
/// OSError) for the rest; the kind's name is the exception's `kind` attribute.
/// std::bad_alloc becomes MemoryError.

#include <stdexcept>
#include <string>

namespace ooc {

/// What kind of failure an Error is: what a caller (oocrun's exit status, the Python
/// module's exception type) decides on.
enum class ErrorKind {
  other,          ///< none of those below (an I/O error, a kernel's own failure, ...)
  usage,          ///< the caller asked for what cannot be done as asked (UsageError)
  cancelled,      ///< the run was cancelled (Cancelled)
  not_found,      ///< a file, directory or dataset that does not exist (ENOENT)
  permission,     ///< no right to read, write or create it (EACCES, EPERM, EROFS)
  no_space,       ///< the file system is full, or the quota spent (ENOSPC, EDQUOT)
  out_of_memory,  ///< memory ran out inside a kernel ("FILE: out of memory")
  corrupt,        ///< a file that does not read as its format says (a damaged header,
                  ///< chunk or journal; text that does not parse)
  busy,           ///< in use: locked by another run, or an interrupted run not yet finished
  value,          ///< a value the data cannot give, numpy's ValueError: a reduction of an
                  ///< empty array ("zero-size array to reduction operation ..."), an
                  ///< integer to a negative power
  index,          ///< an index that does not fit the array it selects from, numpy's
                  ///< IndexError (an ooc::IndexError, a UsageError)
};

/// The kind's name as written above ("not_found"); what Python's `Error.kind` reads.
const char* kind_name(ErrorKind kind) noexcept;

/// The kind the errno value `err` says (ENOENT: not_found, ...; other for the rest).
ErrorKind kind_of_errno(int err) noexcept;

/// A run-time failure, tied to a file where one is known.
class Error : public std::runtime_error {
 public:
  /// what() reads "FILE: PROBLEM" (or PROBLEM, if `path` is empty). `option`: the words of
  /// `problem` that name the caller's option the error is about or whose use fixes it
  /// (their first occurrence in `problem`; a message names it before any text the caller
  /// gave), or empty.
  Error(std::string path, std::string problem, ErrorKind kind = ErrorKind::other, std::string option = {});
  /// A problem that concerns no file: what() is `problem`, path() is empty.
  explicit Error(std::string problem) : Error(std::string(), std::move(problem)) {}

  const std::string& path() const noexcept { return path_; }
  const std::string& problem() const noexcept { return problem_; }
  ErrorKind kind() const noexcept { return kind_; }
  /// The words in problem() that name an option, in the API's terms ("overwrite",
  /// "tile_bytes", "chunks/compression"); empty when the error names none. A front end
  /// with names of its own (oocrun's flags) says its name at their first occurrence.
  const std::string& option() const noexcept { return option_; }

 private:
  std::string path_;
  std::string problem_;
  ErrorKind kind_;
  std::string option_;
};

/// The caller asked for something that cannot be done as asked (bad operation,
/// incompatible shapes, in-place with a dtype change); the command line maps it to exit 2.
/// Its kind is ErrorKind::usage, or index for an IndexError.
class UsageError : public Error {
 public:
  UsageError(std::string path, std::string problem, std::string option = {})
      : Error(std::move(path), std::move(problem), ErrorKind::usage, std::move(option)) {}
  explicit UsageError(std::string problem) : UsageError(std::string(), std::move(problem)) {}

 protected:
  /// For the usage errors of a kind of their own (IndexError).
  UsageError(std::string path, std::string problem, ErrorKind kind) : Error(std::move(path), std::move(problem), kind) {}
};

/// An index that does not fit the array it selects from, where numpy raises IndexError:
/// out of bounds, too many indices, a boolean index whose shape does not match the axes
/// it covers, an index array neither of integers nor of bools. A UsageError (oocrun
/// exits 2) whose kind is ErrorKind::index (Python's IndexError, whose message is
/// numpy_text()).
class IndexError : public UsageError {
 public:
  /// `problem` says where (the selection's text) and numpy's words, `numpy_text` numpy's
  /// words alone ("index 10 is out of bounds for axis 0 with size 10").
  IndexError(std::string path, std::string problem, std::string numpy_text)
      : UsageError(std::move(path), std::move(problem), ErrorKind::index), numpy_text_(std::move(numpy_text)) {}
  const std::string& numpy_text() const noexcept { return numpy_text_; }

 private:
  std::string numpy_text_;
};

/// A run stopped because PipelineOptions::cancel was set (Ctrl-C in oocrun). Its kind is
/// always ErrorKind::cancelled.
class Cancelled : public Error {
 public:
  Cancelled(std::string path, std::string problem) : Error(std::move(path), std::move(problem), ErrorKind::cancelled) {}
  explicit Cancelled(std::string problem) : Cancelled(std::string(), std::move(problem)) {}
};

}  // namespace ooc
