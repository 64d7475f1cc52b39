#pragma once
/// Every public header of ooc in one. A file that writes no kernel may include only what
/// it uses and skip Eigen (README, "The C++ API"); ooc/internal/ is not API.

#include "ooc/array_map.hpp"
#include "ooc/array_path.hpp"
#include "ooc/compression.hpp"
#include "ooc/dtype.hpp"
#include "ooc/error.hpp"
#include "ooc/journal.hpp"
#include "ooc/kernel.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/runtime.hpp"
#include "ooc/scalar.hpp"
#include "ooc/selection.hpp"
#include "ooc/shape.hpp"
#include "ooc/state_bytes.hpp"
#include "ooc/text.hpp"
#include "ooc/tile_plan.hpp"
#include "ooc/kernels/elementwise.hpp"
#include "ooc/kernels/reductions.hpp"
#include "ooc/kernels/axis.hpp"
#include "ooc/kernels/expr.hpp"
