#include "ooc/error.hpp"

#include <cerrno>

namespace ooc {

static std::string join(const std::string& path, const std::string& problem) {
  return path.empty() ? problem : path + ": " + problem;
}

Error::Error(std::string path, std::string problem, ErrorKind kind, std::string option)
    : std::runtime_error(join(path, problem)),
      path_(std::move(path)),
      problem_(std::move(problem)),
      kind_(kind),
      option_(std::move(option)) {}

const char* kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::other: return "other";
    case ErrorKind::usage: return "usage";
    case ErrorKind::cancelled: return "cancelled";
    case ErrorKind::not_found: return "not_found";
    case ErrorKind::permission: return "permission";
    case ErrorKind::no_space: return "no_space";
    case ErrorKind::out_of_memory: return "out_of_memory";
    case ErrorKind::corrupt: return "corrupt";
    case ErrorKind::busy: return "busy";
    case ErrorKind::value: return "value";
    case ErrorKind::index: return "index";
  }
  return "other";
}

ErrorKind kind_of_errno(int err) noexcept {
  switch (err) {
    case ENOENT: return ErrorKind::not_found;
    case EACCES: case EPERM: case EROFS: return ErrorKind::permission;
    case ENOSPC: case EDQUOT: case EFBIG: return ErrorKind::no_space;
    case ENOMEM: return ErrorKind::out_of_memory;
    case EBUSY: case ETXTBSY: case EAGAIN: return ErrorKind::busy;
    default: return ErrorKind::other;
  }
}

}  // namespace ooc
