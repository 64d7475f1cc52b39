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
#include <exception>
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


namespace {

// Metadata of an object that is open could not be read: the file is damaged.
constexpr ErrorKind kDamaged = ErrorKind::corrupt;

// True if `path` names a group of `file`: false for a dataset, or a link that leads
// nowhere (dangling).
bool is_group(hid_t file, const std::string& path) {
  Id object(H5Oopen(file, path.c_str(), H5P_DEFAULT), H5Oclose);
  return object.valid() && H5Iget_type(object.get()) == H5I_GROUP;
}

}  // namespace


// True if every component of `path` exists as a link (H5Lexists needs each parent).
bool link_exists(hid_t file, const std::string& path, const std::string& file_name) {
  std::string parent = "/";
  for (std::size_t at = 1; at <= path.size();) {
    const std::size_t next = path.find('/', at);
    const std::string prefix = path.substr(0, next == std::string::npos ? path.size() : next);
    if (prefix.size() > 1) {
      const htri_t exists = H5Lexists(file, prefix.c_str(), H5P_DEFAULT);
      if (exists == 0) return false;
      // The library fails where the parent is no group (a dataset, a dangling link):
      // nothing is inside it. In a group, a failure is a damaged file.
      if (exists < 0) {
        if (!is_group(file, parent)) return false;
        throw Error(where(file_name, path), "cannot look up " + prefix + " (damaged file)", kDamaged);
      }
      parent = prefix;
    }
    if (next == std::string::npos) break;
    at = next + 1;
  }
  return true;
}

namespace {


// The library's number for the file an object (or a file) lies in: links may lead out of
// the file that was opened (external links), and then the object's bytes are in another.
unsigned long file_number(hid_t object, const std::string& label) {
  static constexpr const char* kCannot = "cannot tell which file it lies in (damaged file)";
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info{};
  check(H5Oget_info3(object, &info, H5O_INFO_BASIC), label, kCannot, kDamaged);
#else
  H5O_info_t info{};
  check(H5Oget_info2(object, &info, H5O_INFO_BASIC), label, kCannot, kDamaged);
#endif
  return info.fileno;
}

// A name the library keeps for an object (H5Fget_name, H5Iget_name: the size, then the
// characters); "" for none.
std::string kept_name(ssize_t (*get)(hid_t, char*, std::size_t), hid_t object, const std::string& label) {
  static constexpr const char* kCannot = "cannot read where it lies (damaged file)";
  std::string name(static_cast<std::size_t>(check(get(object, nullptr, 0), label, kCannot, kDamaged)), '\0');
  if (!name.empty()) check(get(object, name.data(), name.size() + 1), label, kCannot, kDamaged);
  return name;
}

}  // namespace


// "other.h5:/data": where an object that lies in another file than `file` is, else "".
std::string elsewhere(hid_t file, hid_t object, const std::string& label) {
  if (file_number(object, label) == file_number(file, label)) return "";
  const std::string name = kept_name(H5Fget_name, object, label), path = kept_name(H5Iget_name, object, label);
  return (name.empty() ? std::string("another file") : name) + (path.empty() ? "" : ":" + path);
}


DatasetInfo describe_open(hid_t file, hid_t dset, const std::string& file_name, const std::string& name) {
  const std::string label = where(file_name, name);
  DatasetInfo info;
  info.name = name;
  info.elsewhere = elsewhere(file, dset, label);
  Id type(check(H5Dget_type(dset), label, "cannot read its type (damaged file)", kDamaged), H5Tclose);
  const TypeAnswer t = classify(type.get(), label);
  info.dtype = t.dtype;
  info.type_text = t.text;

  static constexpr const char* kSpace = "cannot read its shape (damaged file)";
  Id space(check(H5Dget_space(dset), label, kSpace, kDamaged), H5Sclose);
  const H5S_class_t space_class = check(H5Sget_simple_extent_type(space.get()), label, kSpace, kDamaged);
  bool null_space = space_class == H5S_NULL;
  if (space_class == H5S_SIMPLE) {
    const int ndims = check(H5Sget_simple_extent_ndims(space.get()), label, kSpace, kDamaged);
    std::vector<hsize_t> dims(static_cast<std::size_t>(ndims));
    check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), label, kSpace, kDamaged);
    for (hsize_t d : dims) info.shape.push_back(static_cast<std::int64_t>(d));
  }

  static constexpr const char* kLayout = "cannot read its layout and filters (damaged file)";
  Id dcpl(check(H5Dget_create_plist(dset), label, kLayout, kDamaged), H5Pclose);
  switch (check(H5Pget_layout(dcpl.get()), label, kLayout, kDamaged)) {
    case H5D_CONTIGUOUS: info.layout = "contiguous"; break;
    case H5D_CHUNKED: info.layout = "chunked"; break;
    case H5D_COMPACT: info.layout = "compact"; break;
    case H5D_VIRTUAL: info.layout = "virtual"; break;
    default: info.layout = "unknown"; break;
  }
  const int nfilters = check(H5Pget_nfilters(dcpl.get()), label, kLayout, kDamaged);
  std::string missing_filter;
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t nelements = 0;
    char filter_name[64] = {};
    const H5Z_filter_t id = check(H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelements, nullptr,
                                                 sizeof filter_name, filter_name, &config),
                                  label, kLayout, kDamaged);
    const char* ours = filters::name_of(static_cast<unsigned>(id));
    info.filters.push_back(ours[0] ? std::string(ours) : filter_name[0] ? filter_name : "filter " + std::to_string(id));
    // H5Zfilter_avail fails (negative) for a plugin that did not load: as good as none.
    if (H5Zfilter_avail(id) <= 0 && !filters::decodable(static_cast<unsigned>(id)) && missing_filter.empty())
      missing_filter = "it is compressed with filter " + std::to_string(id) + " (" + info.filters.back() +
                       "), which this HDF5 library cannot decode" +
                       (id == 32000 ? " (LZF lives in h5py; rewrite the dataset with gzip)" : "");
  }
  if (info.layout == "chunked" && !info.shape.empty()) {
    std::vector<hsize_t> chunk(info.shape.size());
    check(H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), label, kLayout, kDamaged);
    for (hsize_t c : chunk) info.chunks.push_back(static_cast<std::int64_t>(c));
  }
  // 0 is both H5Dget_storage_size's failure and the size of a dataset never written; it
  // is only reported.
  info.stored_bytes = H5Dget_storage_size(dset);
  H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
  check(H5Dget_space_status(dset, &status), label, "cannot read whether its storage is allocated (damaged file)",
        kDamaged);
  info.allocated = status == H5D_SPACE_STATUS_ALLOCATED;
  // In the dataset's own file, user block included; HADDR_UNDEF (its failure too) for
  // storage that is not one contiguous allocated run, which is then not mapped.
  const haddr_t offset = H5Dget_offset(dset);
  if (offset != HADDR_UNDEF && info.elsewhere.empty()) info.offset = static_cast<std::uint64_t>(offset);
  const bool empty = element_count(info.shape).value_or(0) == 0 && !null_space;

  if (!info.dtype) info.why_not_mappable = "its type (" + t.text + ") is not a number type ooc handles";
  else if (null_space) info.why_not_mappable = "it has a null dataspace (no elements, not even a shape)";
  else if (!missing_filter.empty()) info.why_not_mappable = missing_filter;
  else if (!info.elsewhere.empty())
    info.why_not_mappable = "it lies in another file, " + info.elsewhere + " (an external link)";
  else if (info.layout != "contiguous") info.why_not_mappable = "its layout is " + info.layout;
  else if (nfilters > 0) info.why_not_mappable = "it has filters";
  else if (check(H5Pget_external_count(dcpl.get()), label, kLayout, kDamaged) > 0)
    info.why_not_mappable = "its data lives in external files";
  else if (!empty && !info.offset) info.why_not_mappable = "its storage is not allocated (never written)";
  info.readable = info.dtype.has_value() && !null_space && missing_filter.empty();
  info.mappable = info.why_not_mappable.empty();
  return info;
}


Id open_dataset(hid_t file, const std::string& file_name, const std::string& dataset) {
  const std::string label = where(file_name, dataset);
  if (!link_exists(file, dataset, file_name)) throw Error(label, "no such dataset", ErrorKind::not_found);
  Id object(H5Oopen(file, dataset.c_str(), H5P_DEFAULT), H5Oclose);
  if (!object.valid()) throw Error(label, "cannot open this object");
  const H5I_type_t type = check(H5Iget_type(object.get()), label, "cannot tell what kind of object it is");
  if (type == H5I_GROUP) throw Error(label, "is a group, not a dataset");
  if (type != H5I_DATASET) throw Error(label, "is not a dataset");
  static constexpr const char* kCannot = "cannot open the dataset (damaged file)";
  return Id(check(H5Dopen2(file, dataset.c_str(), H5P_DEFAULT), label, kCannot, kDamaged), H5Dclose);
}


Id intermediate_groups(const std::string& label) {
  static constexpr const char* kCannot = "cannot make the link's properties (HDF5 library error)";
  Id lcpl(check(H5Pcreate(H5P_LINK_CREATE), label, kCannot), H5Pclose);
  check(H5Pset_create_intermediate_group(lcpl.get(), 1), label, kCannot);
  return lcpl;
}

namespace {

// What the walk of a file (H5Ovisit, H5Lvisit) gathers: its datasets, and the first error
// met, thrown once the walk is out of the library: an exception must not unwind through
// the library's C frames (it would leave the library inside a call).
struct Walk {
  std::string file;
  std::vector<DatasetInfo> found;
  std::exception_ptr error;
};

herr_t describe_into(hid_t location, const char* name, Walk& walk) {
  const std::string path = std::string("/") + name;
  try {
    // The walk found a dataset here: one that does not open is damaged.
    static constexpr const char* kCannot = "cannot open the dataset (damaged file)";
    Id dset(check(H5Dopen2(location, name, H5P_DEFAULT), where(walk.file, path), kCannot, kDamaged), H5Dclose);
    walk.found.push_back(describe_open(location, dset.get(), walk.file, path));
    return 0;
  } catch (...) {
    walk.error = std::current_exception();
    return -1;  // stops the walk
  }
}

herr_t collect(hid_t object, const char* name, const H5O_info_t* info, void* data) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  return describe_into(object, name, *static_cast<Walk*>(data));
}

// H5Ovisit walks hard links only: a dataset reached through an external link is found here.
herr_t collect_external(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  if (info->type != H5L_TYPE_EXTERNAL) return 0;
  // A dangling link (the object does not open) leads to no dataset; nor does one that
  // cannot say what it leads to (H5I_BADID).
  Id object(H5Oopen(group, name, H5P_DEFAULT), H5Oclose);
  if (!object.valid() || H5Iget_type(object.get()) != H5I_DATASET) return 0;
  return describe_into(group, name, *static_cast<Walk*>(data));
}

}  // namespace


std::vector<DatasetInfo> walk(hid_t file, const std::string& file_name) {
  Walk walk{file_name, {}, nullptr};
  const herr_t objects = H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, collect, &walk);
  if (walk.error) std::rethrow_exception(walk.error);
  check(objects, file_name, "cannot walk the file's objects (damaged file)", kDamaged);
  const herr_t links = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_external, &walk);
  if (walk.error) std::rethrow_exception(walk.error);
  check(links, file_name, "cannot walk the file's links (damaged file)", kDamaged);
  return std::move(walk.found);
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
  return describe_open(f.get(), dset.get(), file, dataset);
}

std::vector<DatasetInfo> list(const std::string& file) {
  Session session(file);
  probe_in_child(file, "");
  Id f = open_file(file, false);
  std::vector<DatasetInfo> found = walk(f.get(), file);
  std::sort(found.begin(), found.end(), [](const DatasetInfo& a, const DatasetInfo& b) { return a.name < b.name; });
  return found;
}

std::string elsewhere(const std::string& file, const std::string& name) {
  Session session(file);
  probe_in_child(file, "");  // the whole walk: an output's (hidden) name is looked up anywhere
  Id f = open_file(file, false);
  // The deepest part of `name` that exists: the dataset itself, or the group it would go in.
  for (std::string part = name; !part.empty(); part = part.substr(0, std::max<std::size_t>(1, part.rfind('/')))) {
    if (part == "/" || link_exists(f.get(), part, file)) {
      Id object(H5Oopen(f.get(), part.c_str(), H5P_DEFAULT), H5Oclose);
      if (object.valid()) return elsewhere(f.get(), object.get(), where(file, part));
      H5L_info_t link{};
      check(H5Lget_info(f.get(), part.c_str(), &link, H5P_DEFAULT), where(file, part),
            "cannot read the link (damaged file)", kDamaged);
      if (link.type == H5L_TYPE_EXTERNAL) return "another file (a dangling external link)";
    }
    if (part == "/") break;
  }
  return "";
}

std::string existing_kind(const std::string& file, const std::string& name) {
  Session session(file);
  probe_in_child(file, "");  // the whole walk: an output's (hidden) name is looked up anywhere
  Id f = open_file(file, false);
  // Called for each parent in turn, so the parent of `path` is a group: H5Lexists fails
  // only for a damaged file.
  auto kind = [&](const std::string& path) -> std::string {
    if (path != "/" && check(H5Lexists(f.get(), path.c_str(), H5P_DEFAULT), where(file, path),
                             "cannot look it up (damaged file)", kDamaged) == 0)
      return "";
    Id object(H5Oopen(f.get(), path.c_str(), H5P_DEFAULT), H5Oclose);
    if (!object.valid()) return "link to nothing";
    switch (check(H5Iget_type(object.get()), where(file, path), "cannot tell what kind of object it is")) {
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
  const std::string label = where(file, dataset);
  // These fail only when the library does (out of memory): never for the file's sake.
  static constexpr const char* kCannot = "cannot make the dataset's shape and properties (HDF5 library error)";
  Id f = open_or_create(file);
  Id type = make_type(dtype, label);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Id space(check(shape.empty() ? H5Screate(H5S_SCALAR)
                               : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                 label, kCannot),
           H5Sclose);
  Id dcpl(check(H5Pcreate(H5P_DATASET_CREATE), label, kCannot), H5Pclose);
  // Contiguous so it can be mapped; space allocated now and never filled (we write it all).
  check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), label, kCannot);
  check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), label, kCannot);
  check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), label, kCannot);
  Id lcpl = intermediate_groups(label);
  Id dset(H5Dcreate2(f.get(), dataset.c_str(), type.get(), space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
          H5Dclose);
  if (!dset.valid()) throw Error(label, "cannot create the dataset");
  // HADDR_UNDEF: no storage, as an empty dataset has; for one with elements the call
  // failed, and the caller must not map bytes that are not the dataset's.
  const haddr_t offset = H5Dget_offset(dset.get());
  if (offset == HADDR_UNDEF && element_count(shape).value_or(0) > 0)
    throw Error(label, "cannot find where the new dataset's storage is");
  dset.close(label, "cannot close the new dataset (disk full?)");
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) throw Error(file, "cannot flush the HDF5 file");
  f.close(file, "cannot close the HDF5 file (disk full?)");
  return offset == HADDR_UNDEF ? 0 : static_cast<std::uint64_t>(offset);
}

void move_dataset(const std::string& file, const std::string& from, const std::string& to, bool replace) {
  Session session(file);
  Id f = open_file(file, true);
  if (replace && link_exists(f.get(), to, file) && H5Ldelete(f.get(), to.c_str(), H5P_DEFAULT) < 0)
    throw Error(where(file, to), "cannot replace the existing dataset");
  Id lcpl = intermediate_groups(where(file, to));
  if (H5Lmove(f.get(), from.c_str(), f.get(), to.c_str(), lcpl.get(), H5P_DEFAULT) < 0)
    throw Error(where(file, to), "cannot give the finished dataset its name");
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) throw Error(file, "cannot flush the HDF5 file");
  f.close(file, "cannot close the HDF5 file (disk full?)");
}

}  // namespace ooc::hdf5
