#include "cli/output.hpp"

#include "ooc/array_path.hpp"
#include "ooc/compression.hpp"
#include "ooc/zarr.hpp"

#include <algorithm>

namespace ooc::cli {

void ChunkedOutput::add_options(CLI::App& command) {
  command.add_option("--chunks", chunks, "HDF5 or Zarr output: chunks of N rows (first axis), or auto (about 1 MiB)");
  command.add_option("--compression", compression,
                     "HDF5 or Zarr output: gzip[:LEVEL], zlib[:LEVEL], zstd[:LEVEL] (Zarr), lz4, blosc[:CODEC[:LEVEL]] "
                     "or none");
  command.add_flag("--shuffle", shuffle, "HDF5 or Zarr output: byte shuffle before compressing");
}

MappedArray make_output(const Job& job, const ChunkedOutput& chunked, const std::string& path, DType dtype,
                        const MappedArray* like, const Shape& shape, Order order, bool overwrite) {
  if (job.spans_ranks() && is_zarr(path))
    throw UsageError(path, "Zarr outputs are written by one process, not under mpirun");
  if (!chunked.asked())
    return like ? job.create_output(path, dtype, *like, overwrite) : create_array(path, dtype, shape, order, overwrite);
  const bool zarr = is_zarr(path);
  if (!zarr && !ArrayPath::parse(path).in_hdf5())
    throw UsageError(path, "--chunks, --compression and --shuffle make HDF5 datasets or Zarr arrays: name the output "
                           "FILE.h5:/dataset or OUT.zarr");
  if (job.spans_ranks()) throw UsageError(path, "--chunks/--compression outputs are written by one process, not under mpirun");
  Compression how;
  try {
    if (!chunked.compression.empty()) how.parse_codec(chunked.compression);
  } catch (const UsageError& e) {
    throw UsageError("--" + e.problem());  // the library names the value; the flag is ours
  }
  how.shuffle = chunked.shuffle;
  if (!chunked.chunks.empty() && chunked.chunks != "auto") {
    const std::string& t = chunked.chunks;
    if (t.size() > 15 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoll(t) == 0)
      throw UsageError("--chunks " + t + ": give a number of rows (of the first axis) or auto");
    how.chunk_rows = std::stoll(t);
  }
  if (zarr) return create_zarr(path, dtype, shape, order, how);
  if (order == Order::fortran && shape.size() > 1)
    throw UsageError(path, "HDF5 datasets are C order: a Fortran-order result cannot be written to one");
  return create_compressed(path, dtype, shape, how, overwrite);
}

}  // namespace ooc::cli
