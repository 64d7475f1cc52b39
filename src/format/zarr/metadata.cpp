// Zarr's JSON: an array's `.zarray` read and checked, a group's arrays listed
// (`.zmetadata` or its directories), the JSON a new array is described by.

#include "format/zarr.hpp"
#include "format/zarr/zarray.hpp"
#include "format/codecs.hpp"
#include "ooc/error.hpp"
#include "os/file.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>

namespace ooc::zarr {
namespace {

using nlohmann::json;

// What a metadata file's fields failed on: the problem, said of the file.
struct Bad {
  std::string problem;
};

std::string text_of(const json& value) { return value.dump(); }

std::int64_t integer_field(const json& value, const char* what, std::int64_t least) {
  if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<std::uint64_t>() >
                                                                       static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())))
    throw Bad{std::string(what) + " " + text_of(value) + " is not an integer"};
  const std::int64_t n = value.get<std::int64_t>();
  if (n < least) throw Bad{std::string(what) + " " + text_of(value) + " is less than " + std::to_string(least)};
  return n;
}

int small_int(const json& codec, const char* key, int fallback, int low, int high) {
  if (!codec.contains(key)) return fallback;
  const json& v = codec.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < low || v.get<std::int64_t>() > high)
    throw Bad{std::string("codec ") + codec.value("id", std::string("?")) + ": " + key + " " + text_of(v) +
              " is not an integer from " + std::to_string(low) + " to " + std::to_string(high)};
  return static_cast<int>(v.get<std::int64_t>());
}

// A codec's JSON ({"id": "blosc", ...}) as ooc decodes it; any other is refused by name.
Codec codec_of(const json& j, DType dtype, bool as_filter) {
  if (!j.is_object() || !j.contains("id") || !j.at("id").is_string())
    throw Bad{std::string(as_filter ? "filter " : "compressor ") + text_of(j) + " has no \"id\""};
  Codec c;
  c.id = j.at("id").get<std::string>();
  if (!as_filter) {
    if (c.id == "blosc") {
      c.cname = j.value("cname", std::string("lz4"));
      if (codecs::blosc_codec_number(c.cname.c_str()) < 0)
        throw Bad{"blosc codec \"" + c.cname + "\" is not one this blosc library has (blosclz, lz4, lz4hc, zlib, zstd)"};
      c.level = small_int(j, "clevel", 5, 0, 9);
      c.shuffle = small_int(j, "shuffle", 1, -1, 2);
      return c;
    }
    if (c.id == "zlib" || c.id == "gzip") {
      c.level = small_int(j, "level", 1, 0, 9);
      return c;
    }
    if (c.id == "zstd") {
      c.level = small_int(j, "level", 1, -131072, 22);
      return c;
    }
    if (c.id == "lz4") {
      c.level = small_int(j, "acceleration", 1, -1000000, 1000000);
      return c;
    }
    throw Bad{"compressor \"" + c.id + "\" is not one ooc decodes (it decodes blosc, zlib, gzip, zstd, lz4)"};
  }
  if (c.id == "shuffle") {
    c.item = static_cast<std::size_t>(small_int(j, "elementsize", 4, 0, 1 << 20));
    return c;
  }
  if (c.id == "delta") {
    // Only a delta in the array's own type: its decoding is then a running sum.
    DType d = dtype;
    try {
      if (j.contains("dtype")) d = DType::parse(j.at("dtype").get<std::string>());
      if (j.contains("astype") && DType::parse(j.at("astype").get<std::string>()) != d) d = DType(Kind::boolean, 1);
    } catch (const std::exception&) {
      d = DType(Kind::boolean, 1);
    }
    const bool summable = dtype.is_native() && (dtype.kind() == Kind::signed_int || dtype.kind() == Kind::unsigned_int ||
                                                (dtype.kind() == Kind::floating && dtype.itemsize() >= 4));
    if (d != dtype || !summable)
      throw Bad{"filter delta " + text_of(j) + " is not one ooc decodes (only a delta in the array's own dtype, native byte order, integers, float32 or float64)"};
    c.item = static_cast<std::size_t>(dtype.itemsize());
    c.stored = dtype;
    return c;
  }
  if (c.id == "astype") {
    // numcodecs' AsType: stored as encode_dtype, decoded by numpy's astype to decode_dtype,
    // which must be the dtype of what it decodes into (the array's, or the next filter's).
    try {
      c.stored = DType::parse(j.at("encode_dtype").get<std::string>());
      if (DType::parse(j.at("decode_dtype").get<std::string>()) != dtype) throw std::invalid_argument("decode_dtype");
    } catch (const std::exception&) {
      throw Bad{"filter astype " + text_of(j) + " is not one ooc decodes (an encode_dtype ooc reads, and the array's dtype, " +
                dtype.descr() + ", as its decode_dtype)"};
    }
    c.item = static_cast<std::size_t>(c.stored.itemsize());
    return c;
  }
  throw Bad{"filter \"" + c.id + "\" is not one ooc decodes (it decodes shuffle, delta and astype)"};
}

// The fill value, one element of `dtype` (numpy's np.array(v, dtype)).
std::vector<std::byte> fill_of(const json& v, DType dtype) {
  std::vector<std::byte> out;
  if (v.is_null()) return out;
  out.resize(static_cast<std::size_t>(dtype.itemsize()));
  auto from = [&](DType type, const void* value) { convert(type, value, dtype, out.data(), 1); };
  if (v.is_boolean()) {
    const bool b = v.get<bool>();
    from(DType(Kind::boolean, 1), &b);
  } else if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    from(DType(Kind::unsigned_int, 8), &u);
  } else if (v.is_number_integer()) {
    const std::int64_t i = v.get<std::int64_t>();
    from(DType(Kind::signed_int, 8), &i);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    from(DType(Kind::floating, 8), &d);
  } else if (v.is_string() && dtype.kind() == Kind::floating &&
             (v == "NaN" || v == "Infinity" || v == "-Infinity")) {
    const double d = v == "NaN" ? std::numeric_limits<double>::quiet_NaN()
                                : (v == "Infinity" ? 1.0 : -1.0) * std::numeric_limits<double>::infinity();
    from(DType(Kind::floating, 8), &d);
  } else {
    throw Bad{"fill_value " + text_of(v) + " is not a " + dtype.name()};
  }
  return out;
}

Metadata metadata_of(const json& j) {
  if (!j.is_object()) throw Bad{"is not a JSON object"};
  static const std::set<std::string> kKeys = {"zarr_format", "shape",       "chunks",  "dtype",
                                              "compressor",  "fill_value",  "order",   "filters",
                                              "dimension_separator"};
  for (const auto& [key, value] : j.items())
    if (!kKeys.contains(key)) throw Bad{"unknown key \"" + key + "\" (Zarr v2 has none such)"};
  for (const char* key : {"zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters"})
    if (!j.contains(key)) throw Bad{std::string("no \"") + key + "\""};
  if (j.at("zarr_format") != 2) throw Bad{"zarr_format " + text_of(j.at("zarr_format")) + ": ooc reads Zarr v2 only"};
  Metadata m;
  const json& dtype = j.at("dtype");
  if (!dtype.is_string()) throw Bad{"dtype " + text_of(dtype) + " is a structured dtype, not one ooc reads"};
  try {
    m.dtype = DType::parse(dtype.get<std::string>());
  } catch (const Error& e) {
    throw Bad{"dtype " + text_of(dtype) + ": " + e.problem()};
  }
  const json &shape = j.at("shape"), &chunks = j.at("chunks");
  if (!shape.is_array()) throw Bad{"shape " + text_of(shape) + " is not a list"};
  if (!chunks.is_array()) throw Bad{"chunks " + text_of(chunks) + " is not a list"};
  if (chunks.size() != shape.size())
    throw Bad{"chunks " + text_of(chunks) + " has " + std::to_string(chunks.size()) + " axes, shape " + text_of(shape) +
              " has " + std::to_string(shape.size())};
  for (const json& n : shape) m.shape.push_back(integer_field(n, "shape", 0));
  for (const json& n : chunks) m.chunks.push_back(integer_field(n, "chunks", 1));
  if (!byte_count(m.shape, m.dtype.itemsize())) throw Bad{"shape " + text_of(shape) + " overflows"};
  // A chunk is decoded whole in memory: within blosc's 2 GiB a buffer, and so any codec's.
  const auto chunk_bytes = byte_count(m.chunks, m.dtype.itemsize());
  if (!chunk_bytes || *chunk_bytes > std::numeric_limits<std::int32_t>::max() - 64)
    throw Bad{"chunks " + text_of(chunks) + " of " + m.dtype.name() + " exceed 2 GiB a chunk"};
  const json& order = j.at("order");
  if (order != "C" && order != "F") throw Bad{"order " + text_of(order) + " is neither \"C\" nor \"F\""};
  m.order = order == "F" ? Order::fortran : Order::c;
  if (j.contains("dimension_separator")) {
    const json& s = j.at("dimension_separator");
    if (s != "." && s != "/") throw Bad{"dimension_separator " + text_of(s) + " is neither \".\" nor \"/\""};
    m.separator = s.get<std::string>()[0];
  }
  if (!j.at("compressor").is_null()) m.compressor = codec_of(j.at("compressor"), m.dtype, false);
  const json& filters = j.at("filters");
  if (!filters.is_null()) {
    if (!filters.is_array()) throw Bad{"filters " + text_of(filters) + " is not a list"};
    DType stage = m.dtype;  // the dtype a filter decodes into: an astype before it changes it
    for (const json& f : filters) {
      m.filters.push_back(codec_of(f, stage, true));
      if (m.filters.back().id == "astype") stage = m.filters.back().stored;
    }
  }
  m.fill = fill_of(j.at("fill_value"), m.dtype);
  return m;
}

json parse_text(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." without its tag.
    std::string what = e.what();
    if (const auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    throw Bad{"not JSON: " + what};
  }
}

std::string read_text(const std::filesystem::path& file, ErrorKind& kind) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::error_code ec;
    kind = std::filesystem::exists(file, ec) ? ErrorKind::permission : ErrorKind::not_found;
    throw Bad{kind == ErrorKind::not_found ? "missing: not a Zarr array" : "cannot be read"};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

bool is_array(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(std::filesystem::path(path) / ".zarray", ec);
}

bool is_group(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(std::filesystem::path(path) / ".zgroup", ec);
}

bool names_zarr(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // "out.zarr/"
  if (p.extension() == ".npy") return false;   // a .npy file, wherever it is
  for (const auto& part : p)
    if (part.string().size() > 5 && part.string().ends_with(".zarr")) return true;
  return is_array(p.string()) || (p.has_parent_path() && is_group(p.parent_path().string()));
}

std::string Metadata::codecs_text() const {
  std::string text;
  auto one = [](const Codec& c) {
    if (c.id == "blosc")
      return "blosc(" + c.cname + ", clevel " + std::to_string(c.level) + ", " +
             (c.shuffle == 2 ? "bitshuffle" : c.shuffle == 0 ? "noshuffle" : "shuffle") + ")";
    if (c.id == "shuffle" || c.id == "delta") return c.id;
    if (c.id == "astype") return "astype(" + c.stored.descr() + ")";
    return c.id + "(" + std::to_string(c.level) + ")";
  };
  for (const Codec& f : filters) text += one(f) + "+";
  return text + (compressor ? one(*compressor) : "none");
}

Metadata read_metadata(const std::string& array) {
  const std::filesystem::path file = std::filesystem::path(array) / ".zarray";
  ErrorKind kind = ErrorKind::corrupt;
  try {
    return metadata_of(parse_text(read_text(file, kind)));
  } catch (const Bad& bad) {
    throw Error(file.string(), bad.problem, kind);
  } catch (const json::exception& e) {  // a field of the wrong JSON type
    throw Error(file.string(), std::string("a field of the wrong type (") + e.what() + ")", ErrorKind::corrupt);
  }
}

std::vector<Listed> list(const std::string& group) {
  std::vector<Listed> out;
  auto add = [&](const std::string& name, const json& j) {
    Listed l;
    l.name = name;
    if (j.is_object() && j.contains("dtype")) l.dtype_text = j.at("dtype").is_string() ? j.at("dtype").get<std::string>() : j.at("dtype").dump();
    if (j.is_object() && j.contains("shape") && j.at("shape").is_array())
      for (const json& n : j.at("shape"))
        if (n.is_number_integer()) l.shape.push_back(n.get<std::int64_t>());
    try {
      l.metadata = metadata_of(j);
    } catch (const Bad& bad) {
      l.readable = false;
      l.why = bad.problem;
    } catch (const json::exception& e) {
      l.readable = false;
      l.why = std::string("a field of the wrong type (") + e.what() + ")";
    }
    out.push_back(std::move(l));
  };
  const std::filesystem::path root(group);
  std::error_code ec;
  if (std::filesystem::exists(root / ".zmetadata", ec)) {
    ErrorKind kind = ErrorKind::corrupt;
    const std::filesystem::path file = root / ".zmetadata";
    try {
      const json j = parse_text(read_text(file, kind));
      if (!j.is_object() || !j.contains("metadata") || !j.at("metadata").is_object())
        throw Bad{"has no \"metadata\" object (not consolidated Zarr metadata)"};
      for (const auto& [key, value] : j.at("metadata").items()) {
        if (key == ".zarray") add("", value);
        else if (key.ends_with("/.zarray")) add(key.substr(0, key.size() - 8), value);
      }
    } catch (const Bad& bad) {
      throw Error(file.string(), bad.problem, kind);
    }
  } else {
    for (auto it = std::filesystem::recursive_directory_iterator(root, ec); !ec && it != decltype(it)(); it.increment(ec)) {
      if (!it->is_directory(ec)) continue;
      if (it->path().filename().string().starts_with(".")) {  // ooc's hidden outputs, and others
        it.disable_recursion_pending();
        continue;
      }
      if (!std::filesystem::exists(it->path() / ".zarray", ec)) continue;
      it.disable_recursion_pending();  // an array's directories are its chunks ('/' separator)
      const std::string name = std::filesystem::relative(it->path(), root, ec).generic_string();
      ErrorKind kind = ErrorKind::corrupt;
      try {
        add(name, parse_text(read_text(it->path() / ".zarray", kind)));
      } catch (const Bad& bad) {
        Listed l;
        l.name = name;
        l.readable = false;
        l.why = bad.problem;
        out.push_back(std::move(l));
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Listed& a, const Listed& b) { return a.name < b.name; });
  return out;
}

void update_consolidated(const std::filesystem::path& array, const std::string& shown) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(array, ec);
  if (ec) return;
  for (std::filesystem::path group = absolute.parent_path(); is_group(group.string()) && group != group.parent_path();
       group = group.parent_path()) {
    const std::filesystem::path file = group / ".zmetadata";
    if (!std::filesystem::exists(file, ec)) continue;
    const std::string kept = "; the array is written, but " + file.string() +
                             " still describes the old store: run zarr.consolidate_metadata";
    ErrorKind kind = ErrorKind::corrupt;
    try {
      json j = parse_text(read_text(file, kind));
      if (!j.is_object() || !j.contains("metadata") || !j.at("metadata").is_object())
        throw Bad{"has no \"metadata\" object"};
      json& entries = j.at("metadata");
      const std::string name = std::filesystem::relative(absolute, group, ec).generic_string();
      // The replaced array's entries (its .zattrs too) give way to the new .zarray.
      for (auto it = entries.begin(); it != entries.end();)
        it = it.key().starts_with(name + "/") ? entries.erase(it) : std::next(it);
      entries[name + "/.zarray"] = parse_text(read_text(absolute / ".zarray", kind));
      for (std::filesystem::path up = absolute.parent_path(); up != group; up = up.parent_path()) {
        const std::string key = std::filesystem::relative(up, group, ec).generic_string() + "/.zgroup";
        if (!entries.contains(key)) entries[key] = json{{"zarr_format", 2}};
      }
      const std::string text = j.dump(4) + "\n";
      const std::filesystem::path temp = group / (".zmetadata.ooc-" + std::to_string(::getpid()));
      {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        out << text;
        out.flush();
        if (!out) throw Bad{"cannot be written"};
      }
      const os::UniqueFd fd = os::open_existing(temp.string(), false);
      os::sync_data(fd.get(), temp.string());
      std::filesystem::rename(temp, file, ec);
      if (ec) {
        std::filesystem::remove(temp, ec);
        throw Bad{"cannot be replaced"};
      }
      os::sync_directory(group);
    } catch (const Bad& bad) {
      throw Error(shown, file.filename().string() + " " + bad.problem + kept, kind);
    } catch (const Error& e) {
      throw Error(shown, e.problem() + kept, e.kind());
    }
  }
}

std::string array_json(DType dtype, const Shape& shape, const std::vector<std::int64_t>& chunks, Order order,
                       const Compression& how) {
  json j;
  j["zarr_format"] = 2;
  j["shape"] = shape;
  j["chunks"] = chunks;
  j["dtype"] = dtype.descr();
  j["order"] = order == Order::fortran ? "F" : "C";
  j["filters"] = nullptr;
  // zarr-python's own default fill value for numbers: 0 (false for bool, 0.0 for floats).
  if (dtype.kind() == Kind::boolean) j["fill_value"] = false;
  else if (dtype.kind() == Kind::floating) j["fill_value"] = 0.0;
  else j["fill_value"] = 0;
  if (how.codec == "none" || how.codec.empty()) {
    j["compressor"] = nullptr;
  } else if (how.codec == "blosc") {
    j["compressor"] = {{"id", "blosc"}, {"cname", how.blosc_codec}, {"clevel", how.level < 0 ? 5 : how.level},
                       {"shuffle", how.shuffle ? 1 : 0}, {"blocksize", 0}};
  } else if (how.codec == "lz4") {
    j["compressor"] = {{"id", "lz4"}, {"acceleration", 1}};
  } else {  // zlib, gzip, zstd
    j["compressor"] = {{"id", how.codec}, {"level", how.level < 0 ? 1 : how.level}};
  }
  if (how.shuffle && how.codec != "blosc")
    j["filters"] = json::array({{{"id", "shuffle"}, {"elementsize", dtype.itemsize()}}});
  // As zarr-python writes it (json.dumps, indent 4, sorted keys), so both tools' files diff cleanly.
  return j.dump(4) + "\n";
}

}  // namespace ooc::zarr
