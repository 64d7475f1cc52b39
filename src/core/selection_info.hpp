#pragma once
// Between selection.cpp and mapped_array.cpp: what a selection's array looks like, known
// before any of it is read.

#include "core/layer.hpp"

#include "ooc/mapped_array.hpp"
#include "ooc/selection.hpp"

#include <string>

namespace ooc::detail {

/// The info of source[selection] (shape, order), without reading anything but index arrays
/// (and masks, which the selection counted when it was parsed).
ArrayInfo selection_info(const ArrayInfo& source, const Selection& selection, const std::string& path);

}  // namespace ooc::detail
