#pragma once
// Between selection.cpp and mapped_array.cpp: what a selection's array looks like, known
// before any of it is read; between selection.cpp and pipeline.cpp: how it reads its source.

#include "core/layer.hpp"

#include "ooc/mapped_array.hpp"
#include "ooc/selection.hpp"
#include "os/file.hpp"
#include "os/tile_reader.hpp"

#include <optional>
#include <string>

namespace ooc::detail {

/// The info of source[selection] (shape, order), without reading anything but index arrays
/// (and masks, which the selection counted when it was parsed).
ArrayInfo selection_info(const ArrayInfo& source, const Selection& selection, const std::string& path);

/// The mapped array a selection's reader reads, or nullptr (another reader, or a source
/// with a reader of its own).
const MappedArray* selection_source(TileReader* reader);

/// For the next run: the selection reads its source's spans with O_DIRECT through
/// `direct` (the source reopened so) on the kernel threads, or, when empty, through the
/// mapping. A selection that gathers its blocks in one pass (a stash) keeps the mapping.
void read_selection_directly(TileReader* reader, std::optional<os::UniqueFd> direct);

}  // namespace ooc::detail
