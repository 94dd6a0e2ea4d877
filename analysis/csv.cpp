#include "analysis/csv.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

namespace lifeline::analysis {

namespace {

std::string Where(const CsvTable& t, size_t row, size_t col) {
  return t.source + ":" + std::to_string(t.lines[row]) + ": column " + std::to_string(col + 1) +
         " (" + t.header[col] + ")";
}

std::string Shown(const std::string& cell) {
  if (cell.size() <= 40) return "'" + cell + "'";
  return "'" + cell.substr(0, 40) + "...'";
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

// One record starting at `pos`; advances `pos` past its line end and `line` by the line
// breaks consumed (quoted cells may span lines).
Status ParseRecord(std::string_view text, size_t* pos, int64_t* line, std::string_view source,
                   std::vector<std::string>* cells) {
  cells->clear();
  std::string cell;
  bool quoted = false, was_quoted = false;
  const int64_t start_line = *line;
  size_t i = *pos;
  auto finish_cell = [&]() -> Status {
    if (static_cast<int64_t>(cells->size()) >= kMaxCsvColumns) {
      return ResourceExhausted(std::string(source) + ":" + std::to_string(start_line) +
                               ": more than " + std::to_string(kMaxCsvColumns) + " columns");
    }
    cells->push_back(was_quoted ? cell : Trim(cell));
    cell.clear();
    was_quoted = false;
    return Status::Ok();
  };
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          cell += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++*line;
        cell += c;
      }
    } else if (c == '"' && Trim(cell).empty()) {
      quoted = was_quoted = true;
      cell.clear();
    } else if (c == ',') {
      LL_RETURN_IF_ERROR(finish_cell());
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++i;
      ++*line;
      break;
    } else {
      cell += c;
    }
    if (static_cast<int64_t>(cell.size()) > kMaxCsvCellBytes) {
      return ResourceExhausted(std::string(source) + ":" + std::to_string(*line) + ": column " +
                               std::to_string(cells->size() + 1) + ": a cell longer than " +
                               std::to_string(kMaxCsvCellBytes) + " bytes");
    }
  }
  if (quoted) {
    return InvalidArgument(std::string(source) + ":" + std::to_string(start_line) + ": column " +
                           std::to_string(cells->size() + 1) + ": unterminated quoted cell");
  }
  LL_RETURN_IF_ERROR(finish_cell());
  *pos = i;
  return Status::Ok();
}

bool BlankRecord(const std::vector<std::string>& cells) {
  return cells.size() == 1 && cells[0].empty();
}

}  // namespace

Result<CsvTable> ParseCsv(std::string_view text, std::string_view source) {
  if (static_cast<int64_t>(text.size()) > kMaxCsvBytes) {
    return ResourceExhausted(std::string(source) + ": " + std::to_string(text.size()) +
                             " bytes exceeds the limit of " + std::to_string(kMaxCsvBytes));
  }
  CsvTable t;
  t.source = std::string(source);
  size_t pos = 0;
  int64_t line = 1;
  if (text.starts_with("\xEF\xBB\xBF")) pos = 3;  // UTF-8 byte order mark
  std::vector<std::string> cells;
  // Header: the first non-blank record.
  while (pos < text.size() && t.header.empty()) {
    LL_RETURN_IF_ERROR(ParseRecord(text, &pos, &line, source, &cells));
    if (!BlankRecord(cells)) t.header = cells;
  }
  if (t.header.empty()) return InvalidArgument(t.source + ": empty file (no header line)");
  for (size_t c = 0; c < t.header.size(); ++c) {
    if (t.header[c].empty()) {
      return InvalidArgument(t.source + ":1: column " + std::to_string(c + 1) +
                             ": empty column name in the header");
    }
  }
  while (pos < text.size()) {
    const int64_t row_line = line;
    LL_RETURN_IF_ERROR(ParseRecord(text, &pos, &line, source, &cells));
    if (BlankRecord(cells)) continue;
    if (cells.size() != t.header.size()) {
      return InvalidArgument(t.source + ":" + std::to_string(row_line) + ": " +
                             std::to_string(cells.size()) + " cells, the header has " +
                             std::to_string(t.header.size()));
    }
    if (static_cast<int64_t>(t.rows.size()) >= kMaxCsvRows) {
      return ResourceExhausted(t.source + ":" + std::to_string(row_line) + ": more than " +
                               std::to_string(kMaxCsvRows) + " rows");
    }
    t.rows.push_back(cells);
    t.lines.push_back(row_line);
  }
  if (t.rows.empty()) return InvalidArgument(t.source + ": no data rows after the header");
  return t;
}

Result<CsvTable> ReadCsvFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return IoError("cannot read '" + path + "'");
  if (size > kMaxCsvBytes) {
    return ResourceExhausted(path + ": " + std::to_string(size) + " bytes exceeds the limit of " +
                             std::to_string(kMaxCsvBytes));
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) return IoError("cannot read '" + path + "'");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return ParseJsonLines(text, path);
  return ParseCsv(text, path);
}

namespace {

// A JSON value as a table cell (see ParseJsonLines).
std::string CellOf(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_float()) return v.dump();
  return std::string();
}

}  // namespace

Result<CsvTable> ParseJsonLines(std::string_view text, std::string_view source) {
  if (static_cast<int64_t>(text.size()) > kMaxCsvBytes) {
    return ResourceExhausted(std::string(source) + ": " + std::to_string(text.size()) +
                             " bytes exceeds the limit of " + std::to_string(kMaxCsvBytes));
  }
  CsvTable t;
  t.source = std::string(source);
  std::map<std::string, size_t, std::less<>> column;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return InvalidArgument(t.source + ":" + std::to_string(line_no) +
                             ": not a JSON object (JSON Lines: one object per line)");
    }
    if (static_cast<int64_t>(t.rows.size()) >= kMaxCsvRows) {
      return ResourceExhausted(t.source + ": more than " + std::to_string(kMaxCsvRows) + " rows");
    }
    std::vector<std::string> row(t.header.size());
    for (const auto& [key, value] : j.items()) {
      auto it = column.find(key);
      if (it == column.end()) {
        if (static_cast<int64_t>(t.header.size()) >= kMaxCsvColumns) {
          return ResourceExhausted(t.source + ":" + std::to_string(line_no) + ": more than " +
                                   std::to_string(kMaxCsvColumns) + " distinct keys");
        }
        it = column.emplace(key, t.header.size()).first;
        t.header.push_back(key);
        for (auto& earlier : t.rows) earlier.emplace_back();
        row.emplace_back();
      }
      std::string cell = CellOf(value);
      if (static_cast<int64_t>(cell.size()) > kMaxCsvCellBytes) {
        return ResourceExhausted(t.source + ":" + std::to_string(line_no) + ": key '" + key +
                                 "': value over " + std::to_string(kMaxCsvCellBytes) + " bytes");
      }
      row[it->second] = std::move(cell);
    }
    t.rows.push_back(std::move(row));
    t.lines.push_back(line_no);
  }
  if (t.rows.empty()) return InvalidArgument(t.source + ": no JSON lines");
  return t;
}

bool IsRequestLog(const CsvTable& t) {
  return ColumnIndex(t, "outcome") && ColumnIndex(t, "e2e_ms") &&
         ColumnIndex(t, "client_disconnected");
}

bool IsUserOutcome(std::string_view outcome, std::string_view cancel_reason) {
  return outcome == "completed" || (outcome == "cancelled" && cancel_reason == "client_disconnect");
}

Result<CsvTable> RequestLogSessions(const CsvTable& log) {
  auto col = [&](std::string_view name) { return ColumnIndex(log, name); };
  const auto outcome = col("outcome"), e2e = col("e2e_ms"), reason = col("cancel_reason"),
             ttft = col("ttft_ms"), cls = col("class"), id = col("id"), event = col("event"),
             type = col("type"), disconnected = col("client_disconnected");
  if (!outcome || !e2e) return InvalidArgument(log.source + ": not a request log");
  // The outcomes the application posted (`{"event": "outcome", "id": <the request it
  // joined>, "type"}` lines), by request id: the latest abandoned / completed, and whether
  // any click or conversion came.
  struct Posted {
    int abandoned = -1;
    bool clicked = false, converted = false;
  };
  std::map<std::string, Posted, std::less<>> posted;
  if (event && id && type) {
    for (const std::vector<std::string>& row : log.rows) {
      if (row[*event] != "outcome" || row[*id].empty()) continue;
      Posted& p = posted[row[*id]];
      const std::string& ty = row[*type];
      if (ty == "abandoned") p.abandoned = 1;
      if (ty == "completed") p.abandoned = 0;
      if (ty == "clicked") p.clicked = true;
      if (ty == "converted") p.converted = true;
    }
  }
  CsvTable t;
  t.source = log.source;
  t.header = log.header;
  for (const char* added : {"wait_ms", "abandoned", "clicked", "converted"}) t.header.push_back(added);
  for (size_t r = 0; r < log.rows.size(); ++r) {
    const std::vector<std::string>& row = log.rows[r];
    const std::string_view why = reason ? std::string_view(row[*reason]) : std::string_view();
    if (!IsUserOutcome(row[*outcome], why)) continue;
    const bool left = row[*outcome] == "cancelled";
    std::vector<std::string> kept = row;
    kept.push_back(ttft && !row[*ttft].empty() ? row[*ttft] : row[*e2e]);
    const auto p = id ? posted.find(row[*id]) : posted.end();
    const bool hung_up = disconnected ? row[*disconnected] == "true" : left;
    const bool gone = p != posted.end() && p->second.abandoned >= 0 ? p->second.abandoned == 1 : hung_up;
    kept.push_back(gone ? "1" : "0");
    kept.push_back(p != posted.end() && p->second.clicked ? "1" : "0");
    kept.push_back(p != posted.end() && p->second.converted ? "1" : "0");
    if (cls && kept[*cls].empty()) kept[*cls] = "unclassified";
    t.rows.push_back(std::move(kept));
    t.lines.push_back(log.lines[r]);
  }
  if (t.rows.empty()) {
    return InvalidArgument(log.source + ": no completed or client-abandoned requests among " +
                           std::to_string(log.rows.size()) + " lines");
  }
  return t;
}

std::optional<size_t> ColumnIndex(const CsvTable& t, std::string_view name) {
  for (size_t c = 0; c < t.header.size(); ++c) {
    if (t.header[c] == name) return c;
  }
  return std::nullopt;
}

Result<size_t> FindColumn(const CsvTable& t, std::string_view name, std::string_view flag) {
  if (auto c = ColumnIndex(t, name)) return *c;
  std::string known;
  for (const std::string& h : t.header) known += (known.empty() ? "" : ", ") + h;
  return InvalidArgument(std::string(flag) + " '" + std::string(name) + "': no such column in " +
                         t.source + " (header: " + known + ")");
}

Result<std::vector<double>> LatencyColumn(const CsvTable& t, size_t col) {
  std::vector<double> out;
  out.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string& cell = t.rows[r][col];
    if (cell.empty()) return InvalidArgument(Where(t, r, col) + ": empty cell, expected a number");
    double v = 0;
    const char* end = cell.data() + cell.size();
    auto [p, ec] = std::from_chars(cell.data(), end, v);
    if (ec != std::errc() || p != end) {
      return InvalidArgument(Where(t, r, col) + ": " + Shown(cell) + " is not a number");
    }
    if (!std::isfinite(v) || v < 0 || v > kMaxLatencyMs) {
      return InvalidArgument(Where(t, r, col) + ": " + Shown(cell) +
                             " is outside [0, 1e9] (a latency in milliseconds)");
    }
    out.push_back(v);
  }
  return out;
}

Result<std::vector<uint8_t>> BinaryColumn(const CsvTable& t, size_t col) {
  std::vector<uint8_t> out;
  out.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string v = Lower(t.rows[r][col]);
    if (v == "1" || v == "true") {
      out.push_back(1);
    } else if (v == "0" || v == "false") {
      out.push_back(0);
    } else {
      return InvalidArgument(Where(t, r, col) + ": " + Shown(t.rows[r][col]) +
                             " is not an outcome (expected 0, 1, true or false)");
    }
  }
  return out;
}

Result<std::vector<std::string>> TextColumn(const CsvTable& t, size_t col) {
  std::vector<std::string> out;
  out.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (t.rows[r][col].empty()) return InvalidArgument(Where(t, r, col) + ": empty cell");
    out.push_back(t.rows[r][col]);
  }
  return out;
}

Status RequireBothClasses(const CsvTable& t, size_t col, const std::vector<uint8_t>& values,
                          const std::vector<size_t>& rows, std::string_view what) {
  int64_t ones = 0, n = 0;
  int64_t first_line = -1, last_line = -1;
  auto visit = [&](size_t r) {
    ones += values[r];
    ++n;
    if (first_line < 0) first_line = t.lines[r];
    last_line = t.lines[r];
  };
  if (rows.empty()) {
    for (size_t r = 0; r < values.size(); ++r) visit(r);
  } else {
    for (size_t r : rows) visit(r);
  }
  if (n == 0 || (ones > 0 && ones < n)) return Status::Ok();
  std::ostringstream m;
  m << t.source << ": column " << col + 1 << " (" << t.header[col] << ")";
  if (!what.empty()) m << ", " << what;
  m << ": all " << n << " rows (lines " << first_line << "-" << last_line << ") are "
    << (ones == 0 ? 0 : 1) << "; the fit needs both outcomes";
  return InvalidArgument(m.str());
}

}  // namespace lifeline::analysis
