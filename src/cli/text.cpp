// oocrun import / oocrun export.

#include "cli/text.hpp"

#include "cli/json.hpp"
#include "cli/options.hpp"
#include "ooc/error.hpp"
#include "ooc/text.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace ooc::cli {

namespace {

// "," "\t" "tab" "whitespace" "space" -> the delimiter character (0: whitespace runs).
char delimiter_of(const std::string& text, bool import) {
  if (text == "whitespace" || text == "ws") return import ? 0 : ' ';
  if (text == "\\t" || text == "tab" || text == "\t") return '\t';
  if (text == "space") return ' ';
  if (text.size() == 1 && text != "\n" && text != "\r" && text != "\"") return text[0];
  throw UsageError("--delimiter '" + text + "': one character, '\\t' or 'whitespace'");
}

std::vector<int> columns_of(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;  // stays 0 where stoi finds no number or one out of int's range
    int c = 0;
    try {
      c = std::stoi(item, &used);
    } catch (const std::logic_error&) {
    }
    if (used == 0 || used != item.size())
      throw UsageError("--columns '" + text + "': expected column numbers such as 0,3,5 (negative from the end)");
    out.push_back(c);
  }
  if (out.empty()) throw UsageError("--columns: no column given");
  return out;
}

void write_shape(Json& json, const Shape& shape) {
  json.begin_array();
  for (const auto dimension : shape) json.integer(dimension);
  json.end_array();
}

}  // namespace

struct TextCommands::Impl {
  std::string input, output;
  CLI::App* import = nullptr;
  CLI::App* export_ = nullptr;
  std::string dtype = "f8", delimiter = ",", comments = "#", columns, missing, fmt = "shortest", header_names;
  std::int64_t skip_rows = 0;
  int ndmin = 0;
  bool header = false, overwrite = false, json = false;
  CLI::Option* missing_option = nullptr;
};

TextCommands::TextCommands(CLI::App& app) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.import = app.add_subcommand("import", "read a text (CSV) file into an array, as np.loadtxt reads it");
  m.import->add_option("TEXT", m.input, "the text file ('-': standard input)")->required();
  m.import->add_option("-o,--output", m.output, "path.npy or file.h5:/dataset")->required();
  m.import->add_option("--dtype", m.dtype, "element type (f8 f4 f2 i1 i2 i4 i8 u1 u2 u4 u8; default f8)");
  m.import->add_option("--delimiter", m.delimiter, "field separator: one character, '\\t', or 'whitespace' (default ,)");
  // Checked in run(), in ooc's words (CLI11's NonNegativeNumber said "Value -1 not in range
  // [0 - 1.79769e+308]").
  m.import->add_option("--skip-rows", m.skip_rows, "skip this many lines first, whatever they hold");
  m.import->add_option("--comments", m.comments, "comment string: the rest of a line from it is dropped, e.g. # or // ('' for none; default #)");
  m.import->add_option("--columns", m.columns, "keep these columns only, e.g. 0,3,5 (negative: from the end)");
  m.import->add_flag("--header", m.header, "the first line (after --skip-rows) names the columns: skip it");
  m.missing_option = m.import->add_option("--missing", m.missing, "what an empty field stands for, e.g. nan or 0");
  m.import->add_option("--ndmin", m.ndmin, "as np.loadtxt's ndmin: 0 (default) squeezes, 2 keeps (n, 1)")
      ->check(CLI::Range(0, 2));
  m.import->add_flag("--overwrite", m.overwrite, "replace an existing HDF5 dataset named by -o");
  m.import->add_flag("--json", m.json, "print one JSON object describing the result");

  m.export_ = app.add_subcommand("export", "write a 1-d or 2-d array as text, one row per line, as np.savetxt");
  m.export_->add_option("ARRAY", m.input, "path.npy or file.h5:/dataset")->required();
  m.export_->add_option("-o,--output", m.output, "the text file")->required();
  m.export_->add_option("--delimiter", m.delimiter, "field separator: one character or '\\t' (default ,)");
  m.export_->add_option("--fmt", m.fmt, "shortest (default: the shortest text that reads back the same) or one "
                                         "%-conversion as Python formats it, e.g. %.6g");
  m.export_->add_option("--header", m.header_names, "a first line, e.g. a,b,c");
  m.export_->add_flag("--json", m.json, "print one JSON object describing the result");
  for (CLI::App* sub : {m.import, m.export_}) sub->fallthrough();
}

TextCommands::~TextCommands() = default;

bool TextCommands::parsed() const { return impl_->import->parsed() || impl_->export_->parsed(); }

int TextCommands::run(Context& context) const {
  Impl& m = *impl_;
  context.notes.file = context.notes.subject = m.input;
  context.notes.cancel_tells_progress = false;
  context.notes.cancel_note = "; no output written";
  if (m.import->parsed()) check_output_name(m.output);  // export's output is text: exempt
  const PipelineOptions options = context.pipeline_options();
  const bool progress = context.common.progress, quiet = context.common.quiet;
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  if (m.import->parsed()) {
    TextImportOptions text;
    try {
      text.dtype = DType::from_numpy(m.dtype);
    } catch (const UsageError& e) {
      throw UsageError("--dtype: " + e.problem());
    }
    text.delimiter = delimiter_of(m.delimiter, true);
    if (m.comments.find_first_of("\r\n") != std::string::npos)
      throw UsageError("--comments: a line end cannot start a comment");
    text.comment = m.comments;
    if (m.skip_rows < 0)
      throw UsageError("--skip-rows " + std::to_string(m.skip_rows) + ": a count of lines, 0 or more");
    text.skip_rows = m.skip_rows;
    text.header = m.header;
    if (!m.columns.empty()) text.columns = columns_of(m.columns);
    if (m.missing_option->count() > 0) text.missing = m.missing;
    text.overwrite = m.overwrite;
    text.ndmin = m.ndmin;
    int next_percent = 10;
    if (progress)
      text.on_bytes = [&](std::uint64_t done, std::uint64_t total) {
        if (total == 0) return;
        const int percent = static_cast<int>(100 * std::min(done, total) / total);
        if (percent < next_percent && done < total) return;
        const double s = seconds();
        std::fprintf(stderr, "progress: %d%% (%.1f of %.1f MB, %.2f MB/s)\n", percent, static_cast<double>(done) / 1e6,
                     static_cast<double>(total) / 1e6, s > 0 ? static_cast<double>(done) / 1e6 / s : 0.0);
        next_percent = percent / 10 * 10 + 10;
      };
    const TextImportResult r = import_text(m.input, m.output, text, options);
    const char* warning = "input contained no data";
    if (m.json) {  // with --json, stderr carries only errors: the warning is a member
      Json json;
      json.begin_object().member("input", m.input).member("output", m.output).member("dtype", r.dtype.descr());
      json.key("shape");
      write_shape(json, r.shape);
      json.member("rows", static_cast<std::int64_t>(r.rows)).member("lines", static_cast<std::int64_t>(r.lines))
          .member("bytes", static_cast<std::uint64_t>(r.bytes)).member("seconds", seconds());
      if (r.empty_input) json.member("warning", warning);
      std::cout << json.end_object().text() << "\n";
      return 0;
    }
    if (r.empty_input && !quiet) std::cerr << "oocrun: " << m.input << ": warning: " << warning << "\n";
    if (!quiet)
      std::cerr << "oocrun: import " << m.input << " -> " << m.output << " " << shape_repr(r.shape) << ": "
                << rate_text(r.bytes, seconds()) << "\n";
    return 0;
  }
  TextExportOptions text;
  text.delimiter = delimiter_of(m.delimiter, false);
  text.fmt = m.fmt;
  text.header = m.header_names;
  PipelineOptions o = options;
  if (progress)
    o.on_progress = [&, next_percent = 10](const Progress& p) mutable {
      if (p.elements == 0) return;
      const int percent = static_cast<int>(100 * p.elements_done / p.elements);
      if (percent < next_percent && p.tiles_done < p.tiles) return;
      std::fprintf(stderr, "progress: %d%% (%zu/%zu tiles)\n", percent, p.tiles_done, p.tiles);
      next_percent = percent / 10 * 10 + 10;
    };
  export_text(m.input, m.output, text, o);
  if (m.json) {
    Json json;
    std::cout << json.begin_object().member("input", m.input).member("output", m.output)
                     .member("seconds", seconds()).end_object().text() << "\n";
    return 0;
  }
  if (!quiet) std::cerr << "oocrun: export " << m.input << " -> " << m.output << ": " << seconds() << " s\n";
  return 0;
}

}  // namespace ooc::cli
