#pragma once
/// Text files in and out: a CSV (or whitespace-separated) file to an array, as
/// np.loadtxt reads it, and an array to text, as np.savetxt writes it, streamed through
/// the pipeline with memory bounded by the tile size.

#include "ooc/dtype.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/shape.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ooc {

struct TextImportOptions {
  DType dtype = dtype_of<double>;  ///< integers are parsed as integers, overflow is an error
  char delimiter = ',';            ///< 0: runs of whitespace (np.loadtxt's default)
  /// Comments: the rest of a line from the first occurrence of this string is dropped
  /// (np.loadtxt's comments=, one character or several, as "//"); empty: none.
  std::string comment = "#";
  std::int64_t skip_rows = 0;      ///< lines skipped first, whatever they hold (skiprows)
  bool header = false;             ///< then one more non-blank line skipped (column names)
  std::vector<int> columns;        ///< usecols; negative from the end; empty: all
  std::optional<std::string> missing;  ///< what an empty field stands for ("nan", "0")
  bool overwrite = false;          ///< replace an existing HDF5 dataset
  int ndmin = 0;                   ///< np.loadtxt's ndmin: 0 squeezes (1 column -> (n,))
  /// Called after each chunk with the bytes of the input consumed and its size (0 when
  /// not known, as for a pipe).
  std::function<void(std::uint64_t done, std::uint64_t total)> on_bytes;
};

struct TextImportResult {
  Shape shape;                 ///< what np.loadtxt gives
  DType dtype = dtype_of<double>;
  std::int64_t rows = 0;       ///< data rows
  std::int64_t lines = 0;      ///< lines of the input
  std::uint64_t bytes = 0;     ///< bytes of the input
  bool empty_input = false;    ///< no data rows (np.loadtxt warns "input contained no data")
};

/// Reads the text file `text_path` ("-": standard input) and writes its values as
/// `out_path`: a .npy file, or "file.h5:/dataset". The output appears only when complete
/// (temporary, fsync, rename; a .npy header holds the row count, patched at the end).
/// Bad input throws ooc::Error "FILE:LINE:COLUMN: problem" and leaves nothing behind.
TextImportResult import_text(const std::string& text_path, const std::string& out_path,
                             const TextImportOptions& text = {}, const PipelineOptions& options = {});

struct TextExportOptions {
  char delimiter = ',';
  /// "shortest" (the shortest text that reads back to the same value) or one printf
  /// conversion as Python's % formats it: "%.6g", "%10.3f", "%d".
  std::string fmt = "shortest";
  std::string header;          ///< written as the first line when not empty
};

/// Writes the 0-, 1- or 2-d array `array_path` (.npy, "file.h5:/dataset", a selection)
/// as text to `text_path`, one row per line, as np.savetxt does; published as every
/// output is (temporary, fsync, rename).
void export_text(const std::string& array_path, const std::string& text_path, const TextExportOptions& text = {},
                 const PipelineOptions& options = {});

}  // namespace ooc
