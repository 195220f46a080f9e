// CSV reader with typed columns. Strict on purpose: a malformed line is an error that names the
// file and line, never a silently skipped or zero-filled row.
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "dcalign/data.hpp"
#include "file_io.hpp"

namespace dcalign::data {

namespace {

// Shortens a cell for an error message, so that a binary file read by mistake does not
// produce a message of megabytes.
std::string quote_cell(std::string_view s) {
  std::string out = "'" + std::string(s.substr(0, 40)) + (s.size() > 40 ? "...'" : "'");
  return out;
}

// from_chars is locale-independent (strtod would honour a ',' decimal separator).
bool parse_number(std::string_view s, double& v) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(v);
}

class LineSplitter {
 public:
  LineSplitter(char delim, const std::string& source) : delim_(delim), source_(source) {}

  // Splits `line` into fields (quotes removed, unquoted fields trimmed).
  const std::vector<std::string>& split(std::string_view line, index_t lineno) {
    fields_.clear();
    size_t pos = 0;
    for (;;) {
      skip_blanks(line, pos);
      std::string field;
      if (pos < line.size() && line[pos] == '"') {
        ++pos;
        for (;;) {
          if (pos >= line.size())
            throw IoError("'" + source_ + "': line " + std::to_string(lineno) +
                          ": unterminated quoted field (quoted fields cannot span lines)");
          if (line[pos] == '"') {
            if (pos + 1 < line.size() && line[pos + 1] == '"') {
              field += '"';
              pos += 2;
              continue;
            }
            ++pos;
            break;
          }
          field += line[pos++];
        }
        skip_blanks(line, pos);
        if (pos < line.size() && line[pos] != delim_)
          throw IoError("'" + source_ + "': line " + std::to_string(lineno) +
                        ": unexpected character after a closing quote in field " +
                        std::to_string(fields_.size() + 1));
      } else {
        const size_t end = line.find(delim_, pos);
        std::string_view raw = line.substr(pos, end == std::string_view::npos ? end : end - pos);
        while (!raw.empty() && is_blank(raw.back())) raw.remove_suffix(1);
        field.assign(raw);
        pos = end == std::string_view::npos ? line.size() : end;
      }
      fields_.push_back(std::move(field));
      if (pos >= line.size()) break;
      ++pos;  // the delimiter; a delimiter at the very end yields a last, empty field
    }
    return fields_;
  }

 private:
  bool is_blank(char c) const { return (c == ' ' || c == '\t') && c != delim_; }
  void skip_blanks(std::string_view line, size_t& pos) const {
    while (pos < line.size() && is_blank(line[pos])) ++pos;
  }
  char delim_;
  const std::string& source_;
  std::vector<std::string> fields_;
};

bool blank_line(std::string_view line) {
  for (char c : line)
    if (c != ' ' && c != '\t') return false;
  return true;
}

}  // namespace

bool CsvTable::row_has_missing(index_t row) const {
  const size_t n = columns.size();
  for (size_t c = 0; c < n; ++c)
    if (missing_mask[static_cast<size_t>(row) * n + c]) return true;
  return false;
}

CsvTable parse_csv(const std::string& text, const std::string& source,
                   const std::vector<CsvColumn>& columns, const CsvOptions& opts) {
  if (columns.empty()) throw InvalidInput("parse_csv: no columns specified for '" + source + "'");
  CsvTable t;
  t.columns = columns;
  const size_t ncols = columns.size();
  t.numbers.resize(ncols);
  t.strings.resize(ncols);
  LineSplitter splitter(opts.delimiter, source);

  index_t lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (lineno <= opts.header_lines) {
      t.header.emplace_back(line);
      continue;
    }
    if (blank_line(line)) continue;

    const auto& fields = splitter.split(line, lineno);
    if (fields.size() != ncols)
      throw IoError("'" + source + "': line " + std::to_string(lineno) + ": expected " +
                    std::to_string(ncols) + " fields, found " + std::to_string(fields.size()));
    for (size_t c = 0; c < ncols; ++c) {
      const std::string& f = fields[c];
      const ColumnType type = columns[c].type;
      bool is_missing = false;
      for (const auto& tok : opts.missing_tokens)
        if (f == tok) is_missing = true;
      t.missing_mask.push_back(is_missing ? 1 : 0);
      if (type == ColumnType::numeric) {
        double v = std::numeric_limits<double>::quiet_NaN();
        if (!is_missing && !parse_number(f, v))
          throw IoError("'" + source + "': line " + std::to_string(lineno) + ": field " +
                        std::to_string(c + 1) + " (" + columns[c].name +
                        "): expected a finite number, found " +
                        (f.empty() ? std::string("an empty field") : quote_cell(f)));
        t.numbers[c].push_back(v);
      } else if (type == ColumnType::categorical) {
        t.strings[c].push_back(is_missing ? std::string() : f);
      }
    }
    t.lines.push_back(lineno);
    ++t.rows;
  }
  if (static_cast<index_t>(t.header.size()) < opts.header_lines)
    throw IoError("'" + source + "': expected " + std::to_string(opts.header_lines) +
                  " header line(s), the file has " + std::to_string(t.header.size()));
  return t;
}

CsvTable read_csv(const std::string& path, const std::vector<CsvColumn>& columns,
                  const CsvOptions& opts) {
  return parse_csv(detail::read_all(path), path, columns, opts);
}

}  // namespace dcalign::data
