// What a file holds: datasets described, listed and found, links followed, and the
// writes of its catalogue (a new dataset, a dataset moved into place).

#include "format/hdf5/library.hpp"
#include "format/hdf5/filters.hpp"
#include "format/hdf5/rollback.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace ooc::hdf5 {


// True if every component of `path` exists as a link (H5Lexists needs each parent).
bool link_exists(hid_t file, const std::string& path) {
  std::size_t at = 1;
  while (at <= path.size()) {
    const std::size_t next = path.find('/', at);
    const std::string prefix = path.substr(0, next == std::string::npos ? path.size() : next);
    if (prefix.size() > 1 && H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (next == std::string::npos) break;
    at = next + 1;
  }
  return true;
}

namespace {


// The library's number for the file an object (or a file) lies in: links may lead out of
// the file that was opened (external links), and then the object's bytes are in another.
unsigned long file_number(hid_t object) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info{};
  if (H5Oget_info3(object, &info, H5O_INFO_BASIC) < 0) return 0;
#else
  H5O_info_t info{};
  if (H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0) return 0;
#endif
  return info.fileno;
}

}  // namespace


// "other.h5:/data": where an object that lies in another file than `file` is, else "".
std::string elsewhere(hid_t file, hid_t object) {
  if (file_number(object) == file_number(file)) return "";
  std::string name(static_cast<std::size_t>(std::max<ssize_t>(0, H5Fget_name(object, nullptr, 0))), '\0');
  H5Fget_name(object, name.data(), name.size() + 1);
  std::string path(static_cast<std::size_t>(std::max<ssize_t>(0, H5Iget_name(object, nullptr, 0))), '\0');
  H5Iget_name(object, path.data(), path.size() + 1);
  return (name.empty() ? std::string("another file") : name) + (path.empty() ? "" : ":" + path);
}


DatasetInfo describe_open(hid_t file, hid_t dset, const std::string& name) {
  DatasetInfo info;
  info.name = name;
  info.elsewhere = elsewhere(file, dset);
  Id type(H5Dget_type(dset), H5Tclose);
  const TypeAnswer t = classify(type.get());
  info.dtype = t.dtype;
  info.type_text = t.text;

  Id space(H5Dget_space(dset), H5Sclose);
  const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
  bool null_space = space_class == H5S_NULL;
  if (space_class == H5S_SIMPLE) {
    const int ndims = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(0, ndims)));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    for (hsize_t d : dims) info.shape.push_back(static_cast<std::int64_t>(d));
  }

  Id dcpl(H5Dget_create_plist(dset), H5Pclose);
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_CONTIGUOUS: info.layout = "contiguous"; break;
    case H5D_CHUNKED: info.layout = "chunked"; break;
    case H5D_COMPACT: info.layout = "compact"; break;
    case H5D_VIRTUAL: info.layout = "virtual"; break;
    default: info.layout = "unknown"; break;
  }
  const int nfilters = H5Pget_nfilters(dcpl.get());
  std::string missing_filter;
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t nelements = 0;
    char filter_name[64] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelements, nullptr,
                                           sizeof filter_name, filter_name, &config);
    const char* ours = filters::name_of(static_cast<unsigned>(id));
    info.filters.push_back(ours[0] ? std::string(ours) : filter_name[0] ? filter_name : "filter " + std::to_string(id));
    if (H5Zfilter_avail(id) <= 0 && !filters::decodable(static_cast<unsigned>(id)) && missing_filter.empty())
      missing_filter = "it is compressed with filter " + std::to_string(id) + " (" + info.filters.back() +
                       "), which this HDF5 library cannot decode" +
                       (id == 32000 ? " (LZF lives in h5py; rewrite the dataset with gzip)" : "");
  }
  if (info.layout == "chunked" && !info.shape.empty()) {
    std::vector<hsize_t> chunk(info.shape.size());
    H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    for (hsize_t c : chunk) info.chunks.push_back(static_cast<std::int64_t>(c));
  }
  info.stored_bytes = H5Dget_storage_size(dset);
  H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
  H5Dget_space_status(dset, &status);
  info.allocated = status == H5D_SPACE_STATUS_ALLOCATED;
  const haddr_t offset = H5Dget_offset(dset);  // in the dataset's own file, user block included
  if (offset != HADDR_UNDEF && info.elsewhere.empty()) info.offset = static_cast<std::uint64_t>(offset);
  const bool empty = element_count(info.shape).value_or(0) == 0 && !null_space;

  if (!info.dtype) info.why_not_mappable = "its type (" + t.text + ") is not a number type ooc handles";
  else if (null_space) info.why_not_mappable = "it has a null dataspace (no elements, not even a shape)";
  else if (!missing_filter.empty()) info.why_not_mappable = missing_filter;
  else if (!info.elsewhere.empty())
    info.why_not_mappable = "it lies in another file, " + info.elsewhere + " (an external link)";
  else if (info.layout != "contiguous") info.why_not_mappable = "its layout is " + info.layout;
  else if (nfilters > 0) info.why_not_mappable = "it has filters";
  else if (H5Pget_external_count(dcpl.get()) > 0) info.why_not_mappable = "its data lives in external files";
  else if (!empty && !info.offset) info.why_not_mappable = "its storage is not allocated (never written)";
  info.readable = info.dtype.has_value() && !null_space && missing_filter.empty();
  info.mappable = info.why_not_mappable.empty();
  return info;
}


Id open_dataset(hid_t file, const std::string& file_name, const std::string& dataset) {
  if (!link_exists(file, dataset)) throw Error(where(file_name, dataset), "no such dataset", ErrorKind::not_found);
  Id object(H5Oopen(file, dataset.c_str(), H5P_DEFAULT), H5Oclose);
  if (!object.valid()) throw Error(where(file_name, dataset), "cannot open this object");
  if (H5Iget_type(object.get()) == H5I_GROUP)
    throw Error(where(file_name, dataset), "is a group, not a dataset");
  if (H5Iget_type(object.get()) != H5I_DATASET) throw Error(where(file_name, dataset), "is not a dataset");
  return Id(H5Dopen2(file, dataset.c_str(), H5P_DEFAULT), H5Dclose);
}


Id intermediate_groups() {
  Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  return lcpl;
}


herr_t collect(hid_t object, const char* name, const H5O_info_t* info, void* data) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  auto* found = static_cast<std::vector<DatasetInfo>*>(data);
  Id dset(H5Dopen2(object, name, H5P_DEFAULT), H5Dclose);
  if (dset.valid()) found->push_back(describe_open(object, dset.get(), std::string("/") + name));
  return 0;
}


// H5Ovisit walks hard links only: a dataset reached through an external link is found here.
herr_t collect_external(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  if (info->type != H5L_TYPE_EXTERNAL) return 0;
  Id object(H5Oopen(group, name, H5P_DEFAULT), H5Oclose);  // fails for a dangling link
  if (!object.valid() || H5Iget_type(object.get()) != H5I_DATASET) return 0;
  auto* found = static_cast<std::vector<DatasetInfo>*>(data);
  Id dset(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  if (dset.valid()) found->push_back(describe_open(group, dset.get(), std::string("/") + name));
  return 0;
}


bool has_hdf5_extension(std::string_view file) {
  for (std::string_view ext : {".h5", ".hdf5", ".hdf", ".he5"})
    if (file.size() > ext.size() && file.substr(file.size() - ext.size()) == ext) return true;
  return false;
}


std::optional<DatasetPath> split(std::string_view text) {
  for (std::size_t at = text.find(":/"); at != std::string_view::npos; at = text.find(":/", at + 1)) {
    const std::string file(text.substr(0, at));
    std::error_code ec;  // exists(), not an open: opening a FIFO would wait for a writer
    if (has_hdf5_extension(file) || std::filesystem::exists(file, ec))
      return DatasetPath{file, std::string(text.substr(at + 1))};
  }
  return std::nullopt;
}

bool is_hdf5_file(const std::string& path) {
  // Where the HDF5 library looks: offset 0, then 512, 1024, 2048, ... (a file may start
  // with a user block of such a size, as MATLAB v7.3 .mat files do).
  static constexpr char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  std::error_code ec;  // only a regular file is opened: a FIFO would wait for a writer
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const std::streamoff size = in.tellg();
  for (std::streamoff at = 0; at + 8 <= size; at = at == 0 ? 512 : 2 * at) {
    char head[8] = {};
    if (!in.seekg(at) || !in.read(head, sizeof head)) return false;
    if (std::equal(head, head + 8, kSignature)) return true;
    if (at == 0 && std::string_view(head, 6) == "\x93NUMPY") return false;  // a .npy's data is not searched
  }
  return false;
}


DatasetInfo describe(const std::string& file, const std::string& dataset) {
  Session session(file);
  probe_in_child(file, dataset);
  Id f = open_file(file, false);
  Id dset = open_dataset(f.get(), file, dataset);
  return describe_open(f.get(), dset.get(), dataset);
}

std::vector<DatasetInfo> list(const std::string& file) {
  Session session(file);
  probe_in_child(file, "");
  Id f = open_file(file, false);
  std::vector<DatasetInfo> found;
  H5Ovisit(f.get(), H5_INDEX_NAME, H5_ITER_INC, collect, &found);
  H5Lvisit(f.get(), H5_INDEX_NAME, H5_ITER_INC, collect_external, &found);
  std::sort(found.begin(), found.end(), [](const DatasetInfo& a, const DatasetInfo& b) { return a.name < b.name; });
  return found;
}

std::string elsewhere(const std::string& file, const std::string& name) {
  Session session(file);
  probe_in_child(file, "");  // the whole walk: an output's (hidden) name is looked up anywhere
  Id f = open_file(file, false);
  // The deepest part of `name` that exists: the dataset itself, or the group it would go in.
  for (std::string part = name; !part.empty(); part = part.substr(0, std::max<std::size_t>(1, part.rfind('/')))) {
    if (part == "/" || link_exists(f.get(), part)) {
      Id object(H5Oopen(f.get(), part.c_str(), H5P_DEFAULT), H5Oclose);
      if (object.valid()) return elsewhere(f.get(), object.get());
      H5L_info_t link{};
      if (H5Lget_info(f.get(), part.c_str(), &link, H5P_DEFAULT) >= 0 && link.type == H5L_TYPE_EXTERNAL)
        return "another file (a dangling external link)";
    }
    if (part == "/") break;
  }
  return "";
}

std::string existing_kind(const std::string& file, const std::string& name) {
  Session session(file);
  probe_in_child(file, "");  // the whole walk: an output's (hidden) name is looked up anywhere
  Id f = open_file(file, false);
  auto kind = [&](const std::string& path) -> std::string {
    if (path != "/" && H5Lexists(f.get(), path.c_str(), H5P_DEFAULT) <= 0) return "";
    Id object(H5Oopen(f.get(), path.c_str(), H5P_DEFAULT), H5Oclose);
    if (!object.valid()) return "link to nothing";
    switch (H5Iget_type(object.get())) {
      case H5I_GROUP: return "group";
      case H5I_DATASET: return "dataset";
      case H5I_DATATYPE: return "named datatype";
      default: return "object";
    }
  };
  // Each parent must be a group: nothing can be made inside a dataset.
  for (std::size_t next = name.find('/', 1); next != std::string::npos; next = name.find('/', next + 1)) {
    const std::string parent = name.substr(0, next);
    const std::string k = kind(parent);
    if (k.empty()) return "";  // it and what is under it are made as needed
    if (k != "group")
      throw UsageError(where(file, name), parent + " is a " + k + ", not a group: nothing can be made inside it");
  }
  return kind(name);
}

std::uint64_t create_dataset(const std::string& file, const std::string& dataset, DType dtype, const Shape& shape) {
  Session session(file);
  const bool existing = is_hdf5_file(file);
  Id f = existing ? open_file(file, true)
                  : Id(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, file_access()), H5Fclose);
  if (!f.valid()) throw Error(file, "cannot create the HDF5 file");
  Id type = make_type(dtype);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Id space(shape.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
           H5Sclose);
  Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  // Contiguous so it can be mapped; space allocated now and never filled (we write it all).
  H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
  H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  Id lcpl = intermediate_groups();
  Id dset(H5Dcreate2(f.get(), dataset.c_str(), type.get(), space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
          H5Dclose);
  if (!dset.valid()) throw Error(where(file, dataset), "cannot create the dataset");
  const haddr_t offset = H5Dget_offset(dset.get());
  dset.close(where(file, dataset), "cannot close the new dataset (disk full?)");
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) throw Error(file, "cannot flush the HDF5 file");
  f.close(file, "cannot close the HDF5 file (disk full?)");
  return offset == HADDR_UNDEF ? 0 : static_cast<std::uint64_t>(offset);
}

void move_dataset(const std::string& file, const std::string& from, const std::string& to, bool replace) {
  Session session(file);
  Id f = open_file(file, true);
  if (replace && link_exists(f.get(), to) && H5Ldelete(f.get(), to.c_str(), H5P_DEFAULT) < 0)
    throw Error(where(file, to), "cannot replace the existing dataset");
  Id lcpl = intermediate_groups();
  if (H5Lmove(f.get(), from.c_str(), f.get(), to.c_str(), lcpl.get(), H5P_DEFAULT) < 0)
    throw Error(where(file, to), "cannot give the finished dataset its name");
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) throw Error(file, "cannot flush the HDF5 file");
  f.close(file, "cannot close the HDF5 file (disk full?)");
}

}  // namespace ooc::hdf5
