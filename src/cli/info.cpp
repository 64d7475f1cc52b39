// oocrun info: an array's dtype, shape and layout, or an HDF5 file's datasets.

#include "cli/commands.hpp"
#include "cli/json.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

namespace ooc::cli {
namespace {

void shape_json(Json& j, const Shape& shape) {
  j.begin_array();
  for (std::int64_t n : shape) j.integer(n);
  j.end_array();
}

// Logical bytes against the bytes stored in the file, for an HDF5 dataset with storage.
std::optional<double> compression_ratio(const ArrayEntry& e) {
  if (!e.supported || e.stored_bytes == 0) return std::nullopt;
  return static_cast<double>(e.info.nbytes()) / static_cast<double>(e.stored_bytes);
}

void entry_json(Json& j, const ArrayEntry& e) {
  const ArrayInfo& info = e.info;
  j.begin_object().member("path", e.path).member("format", info.format);
  if (!info.format_version.empty()) j.member("format_version", info.format_version);
  if (e.supported) {
    j.member("dtype", info.dtype.descr()).member("dtype_name", info.dtype.name());
  } else {
    j.key("dtype").null().member("type", e.type);
  }
  j.key("shape");
  shape_json(j, info.shape);
  j.member("order", info.order == Order::c ? "C" : "F").member("fortran_order", info.order == Order::fortran);
  if (e.supported)
    j.member("itemsize", e.info.dtype.itemsize()).member("size", info.size()).member("nbytes", info.nbytes());
  j.member("data_offset", static_cast<std::uint64_t>(info.data_offset));
  if (info.format == "hdf5" || info.format == "zarr") {
    j.member("layout", e.layout).key("filters").begin_array();
    for (const std::string& f : e.filters) j.string(f);
    j.end_array().key("chunks");
    if (e.chunks.empty()) j.null();
    else shape_json(j, e.chunks);
    j.member("stored_bytes", static_cast<std::uint64_t>(e.stored_bytes)).key("compression_ratio");
    if (const auto ratio = compression_ratio(e)) j.number(*ratio);
    else j.null();
    j.member("readable", e.readable).member("mappable", e.mappable);
    j.member("why_not_mappable", e.why_not_mappable);
  }
  j.end_object();
}

std::string entry_text(const ArrayEntry& e) {
  const ArrayInfo& info = e.info;
  std::ostringstream out;
  out << e.path << ": ";
  if (info.format == "npy") out << "npy " << info.format_version << ", ";
  out << (e.supported ? info.dtype.name() + " (" + info.dtype.descr() + ")" : e.type) << ", shape "
      << shape_repr(info.shape);
  if (info.format == "npy") {
    out << ", " << (info.order == Order::c ? "C" : "F") << " order, " << info.nbytes() << " bytes of data at offset "
        << info.data_offset;
  } else {
    if (info.format == "zarr" && e.supported) out << ", " << (info.order == Order::c ? "C" : "F") << " order";
    out << ", " << e.layout;
    for (const std::string& f : e.filters) out << "+" << f;
    if (!e.chunks.empty()) out << ", chunks " << shape_repr(e.chunks);
    if (const auto ratio = compression_ratio(e); ratio && !e.filters.empty()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.2f", *ratio);
      out << ", compression " << text << "x (" << e.stored_bytes << " of " << e.info.nbytes() << " bytes stored)";
    }
    out << (e.mappable ? ", mapped" : e.readable ? ", streamed (" + e.why_not_mappable + ")"
                                                : ", not readable: " + e.why_not_mappable);
  }
  return out.str();
}

}  // namespace

InfoCommand::InfoCommand(CLI::App& app, Common& common)
    : command_(app.add_subcommand("info", "print an array's dtype, shape and layout")) {
  command_->add_option("ARRAY", path_, "path.npy, file.h5, file.h5:/dataset, x.zarr or a Zarr group")->required();
  command_->add_flag("--json", common.json, kJsonHelp);
  command_->fallthrough();
}

int InfoCommand::run(Context& context) const {
  context.notes.file = context.notes.subject = path_;
  const std::vector<ArrayEntry> entries = describe(path_);
  const bool whole_hdf5_file = entries.empty() || entries.front().path != path_;
  // A directory that is not one array is a Zarr group: its arrays, as an HDF5 file's datasets.
  std::error_code ec;
  const bool zarr_group = whole_hdf5_file && std::filesystem::is_directory(path_, ec);
  if (context.common.json && whole_hdf5_file) {
    Json j;
    j.begin_object().member("path", path_).member("format", zarr_group ? "zarr" : "hdf5");
    j.key(zarr_group ? "arrays" : "datasets").begin_array();
    for (const ArrayEntry& e : entries) entry_json(j, e);
    j.end_array().end_object();
    std::cout << j.text() << "\n";
  } else if (context.common.json) {
    Json j;
    entry_json(j, entries.front());
    std::cout << j.text() << "\n";
  } else {
    if (zarr_group) std::cout << path_ << ": Zarr group, " << entries.size() << " array(s)\n";
    else if (whole_hdf5_file) std::cout << path_ << ": HDF5 file, " << entries.size() << " dataset(s)\n";
    for (const ArrayEntry& e : entries) std::cout << entry_text(e) << "\n";
  }
  return 0;
}

}  // namespace ooc::cli
