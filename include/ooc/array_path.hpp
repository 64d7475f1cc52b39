#pragma once
/// The grammar of an array's name, as oocrun and `ooc.open` take it:
/// `x.npy`, `run.h5:/group/dataset`, either with a selection suffix `[::5, 3]`.

#include <optional>
#include <string>
#include <string_view>

namespace ooc {

struct ArrayPath {
  std::string file;       // the file on disk
  std::string dataset;    // the HDF5 dataset ("/group/dataset"), empty for a .npy
  std::string selection;  // what stood between the brackets of a selection, empty if none

  /// Splits `text`. An HDF5 dataset is recognised at the first ":/" whose left side is an
  /// existing file or ends in an HDF5 extension (.h5 .hdf5 .hdf .he5); a selection is a
  /// bracketed suffix unless a file of that very name exists. Throws ooc::UsageError for
  /// unbalanced brackets or an empty selection.
  static ArrayPath parse(std::string_view text);
  bool in_hdf5() const { return !dataset.empty(); }
};

}  // namespace ooc
