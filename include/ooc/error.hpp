#pragma once
/// Errors that name the file and the problem.

#include <stdexcept>
#include <string>

namespace ooc {

/// A run-time failure tied to a file: what() reads "FILE: PROBLEM".
class Error : public std::runtime_error {
 public:
  Error(std::string path, std::string problem);

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
