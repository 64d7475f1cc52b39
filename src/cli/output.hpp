#pragma once
// The array apply and eval write: chunked and compressed when asked, else the job's own.

#include "cli/job.hpp"
#include "ooc/ooc.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace ooc::cli {

/// -o FILE.h5:/x --chunks N|auto --compression C --shuffle: a chunked, compressed output.
struct ChunkedOutput {
  std::string chunks;       // "" (not asked), "auto" or a row count
  std::string compression;  // "" or gzip[:LEVEL], lz4, blosc[:CODEC[:LEVEL]]
  bool shuffle = false;

  bool asked() const { return !chunks.empty() || !compression.empty() || shuffle; }
  /// Adds --chunks, --compression and --shuffle to `command`.
  void add_options(CLI::App& command);
};

/// The output at `path`: shaped as `like` where given (apply), else `shape` in `order`.
MappedArray make_output(const Job& job, const ChunkedOutput& chunked, const std::string& path, DType dtype,
                        const MappedArray* like, const Shape& shape, Order order, bool overwrite);

}  // namespace ooc::cli
