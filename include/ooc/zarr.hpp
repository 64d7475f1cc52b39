#pragma once
/// Zarr v2 arrays as sources and sinks. map_file reads one by its directory
/// (`x.zarr`, `store.zarr/group/array`, with a selection suffix as any array);
/// describe lists a group's arrays; create_array writes one where the name says Zarr.

#include "ooc/compression.hpp"
#include "ooc/mapped_array.hpp"

#include <optional>
#include <string>

namespace ooc {

/// True if `path` names a Zarr array: a directory holding `.zarray`, or a name to write
/// one at (a component ending in ".zarr", as `out.zarr` or `store.zarr/group/x`, or a
/// name in a Zarr group).
bool is_zarr(const std::string& path);

/// A new Zarr v2 array at `path`, written tile by tile: chunks of whole rows (the first
/// axis in C order, the last in Fortran order; `how.chunk_rows`, or about 1 MiB) compressed
/// as `how` says (codec "blosc", "zlib", "gzip", "zstd", "lz4" or "none"; no codec:
/// zarr-python's default, Blosc lz4 level 5 with shuffle) on the kernel threads, each a
/// file of its own. It is built in a hidden directory beside its name and put in place
/// by commit(), replacing a Zarr array of that name (never anything else), with the
/// durability of every ooc output; missing groups of a store on the way are created.
MappedArray create_zarr(const std::string& path, DType dtype, const Shape& shape, Order order = Order::c,
                        const Compression& how = {});

}  // namespace ooc
