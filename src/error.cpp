#include "ooc/error.hpp"

namespace ooc {

static std::string join(const std::string& path, const std::string& problem) {
  return path.empty() ? problem : path + ": " + problem;
}

Error::Error(std::string path, std::string problem)
    : std::runtime_error(join(path, problem)), path_(std::move(path)), problem_(std::move(problem)) {}

}  // namespace ooc
