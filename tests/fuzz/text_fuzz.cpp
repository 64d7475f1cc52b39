// libFuzzer target for the text import's line splitter and field parsers
// (src/text/parse.cpp). The first byte picks the dialect, dtype and columns; the rest is
// the text. Properties: no crash; parsing the text as one chunk or cut in two at a line
// end (as the serial read stage cuts it) gives the same values and the same first error;
// every float field accepted is the value glibc's strtod (correctly rounded) gives;
// buffers reused from one parse to the next change nothing; the fused float path (parse,
// then find the delimiter where the parser stopped) agrees with the plain one.
// Seed corpus in text/.

#include "format/text_parse.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "text_fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t pick = data[0];
  const std::uint8_t cut_at = data[1];
  const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  ooc::text::Dialect dialect;
  dialect.delimiter = (pick & 3) == 0 ? ',' : (pick & 3) == 1 ? 0 : (pick & 3) == 2 ? '\t' : ';';
  // Comments: '#', or (odd cut_at) the two characters "//", as np.loadtxt's comments='//'.
  dialect.comment = (pick & 4) ? ((cut_at & 1) ? "//" : "#") : "";
  static const ooc::DType dtypes[] = {ooc::dtype_of<double>, ooc::dtype_of<float>, ooc::dtype_of<std::int64_t>,
                                      ooc::dtype_of<std::uint8_t>};
  const ooc::DType dtype = dtypes[(pick >> 3) & 3];
  ooc::text::Layout layout;
  layout.fields = 1 + ((pick >> 5) & 3);
  if (pick & 0x80) layout.columns = {0, -1};

  const ooc::text::ChunkResult whole = ooc::text::parse_chunk(text, dialect, layout, dtype, std::nullopt);
  check(whole.values.size() ==
            static_cast<std::size_t>(whole.rows) * static_cast<std::size_t>(layout.kept()) * dtype.itemsize(),
        "values do not fill the rows");

  // The plain path for every float field gives what the fused one gave.
  ooc::text::fused_parsing = false;
  const ooc::text::ChunkResult plain = ooc::text::parse_chunk(text, dialect, layout, dtype, std::nullopt);
  ooc::text::fused_parsing = true;
  check(plain.values == whole.values && plain.rows == whole.rows && plain.lines == whole.lines &&
            plain.error.has_value() == whole.error.has_value() &&
            (!plain.error || (plain.error->line == whole.error->line && plain.error->column == whole.error->column &&
                              plain.error->problem == whole.error->problem)),
        "the fused and the plain float paths disagree");

  // The same into buffers reused from input to input (as the import's chunk pool does).
  static ooc::text::ChunkResult reused;
  static std::vector<std::byte> scratch;
  ooc::text::parse_chunk(text, dialect, layout, dtype, std::nullopt, reused, scratch);
  check(reused.values == whole.values && reused.rows == whole.rows && reused.lines == whole.lines &&
            reused.error.has_value() == whole.error.has_value(),
        "reused buffers give another result");

  // The same text cut at a line end near cut_at / 255 of the way.
  const std::size_t want = text.size() * cut_at / 255;
  const std::size_t nl = text.find('\n', want);
  if (nl != std::string::npos) {
    const std::string_view a(text.data(), nl + 1), b(text.data() + nl + 1, text.size() - nl - 1);
    const ooc::text::ChunkResult first = ooc::text::parse_chunk(a, dialect, layout, dtype, std::nullopt);
    if (first.error) {
      check(whole.error && whole.error->line == first.error->line && whole.error->column == first.error->column &&
                whole.error->problem == first.error->problem,
            "the first half's error is not the whole text's");
    } else {
      const ooc::text::ChunkResult second = ooc::text::parse_chunk(b, dialect, layout, dtype, std::nullopt);
      check(first.rows + second.rows == whole.rows || (whole.error && second.error), "rows differ");
      check(first.lines + second.lines == whole.lines || (whole.error && second.error), "lines differ");
      if (second.error) {
        check(whole.error && whole.error->line == first.lines + second.error->line &&
                  whole.error->problem == second.error->problem,
              "the second half's error is not the whole text's");
      } else {
        check(!whole.error, "an error only in the whole text");
        std::string joined(reinterpret_cast<const char*>(first.values.data()), first.values.size());
        joined.append(reinterpret_cast<const char*>(second.values.data()), second.values.size());
        check(joined == std::string(reinterpret_cast<const char*>(whole.values.data()), whole.values.size()),
              "values differ");
      }
    }
  }

  // Every accepted decimal number is strtod's value, bit for bit.
  for (std::size_t b = 0; b < text.size();) {
    std::size_t e = text.find_first_of(",;\t\n# ", b);
    if (e == std::string::npos) e = text.size();
    const std::string field = text.substr(b, e - b);
    b = e + 1;
    double d = 0;
    if (!ooc::text::parse_double(field, d)) continue;
    if (field.find_first_of("nNiI") != std::string::npos) {
      check(std::isnan(d) || std::isinf(d), "a word that is not nan or inf");
      continue;
    }
    // A field with bytes past ASCII can hold Python's other whitespace (U+00A0, U+0085,
    // ...), which parse_double strips and strtod does not read: test_text.py checks those
    // against np.loadtxt; strtod is the reference for the ASCII ones.
    if (std::any_of(field.begin(), field.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
      continue;
    std::size_t lead = 0;  // Python's whitespace, some of which strtod does not skip
    while (lead < field.size() && ooc::text::is_space(field[lead])) ++lead;
    const double ref = std::strtod(field.c_str() + lead, nullptr);
    check(std::memcmp(&d, &ref, sizeof d) == 0, "a value that is not strtod's");
  }
  return 0;
}
