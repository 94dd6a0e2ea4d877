// CSV reading for the analysis commands: a header line, comma-separated cells (RFC 4180
// quoting with "" escapes, CRLF or LF line ends), typed column extraction whose errors name
// the source, the line, the column number and the column name:
//   "sessions.csv:12: column 1 (latency_ms): 'abc' is not a number"
//
// Ownership: CsvTable owns copies of its cells. Thread-safety: value types, pure functions.
// Failure: InvalidArgument for malformed text, a missing column, a bad cell, an empty table or
// an outcome column with one class; ResourceExhausted for input over the caps below.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lifeline::analysis {

inline constexpr int64_t kMaxCsvBytes = int64_t{1} << 30;     // 1 GiB of text
inline constexpr int64_t kMaxCsvRows = 20'000'000;
inline constexpr int64_t kMaxCsvColumns = 1024;
inline constexpr int64_t kMaxCsvCellBytes = 4096;

struct CsvTable {
  std::string source;                         // file name used in messages
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each row has header.size() cells
  std::vector<int64_t> lines;                 // 1-based line number of each row's start
};

Result<CsvTable> ParseCsv(std::string_view text, std::string_view source);
// JSON Lines (one object per line, e.g. `serve --request-log`) as a table: the columns are
// the keys (the first line's in sorted order, then keys first seen later), a cell the text of a number
// or string, `true` / `false`, and empty for null, a missing key, an object or an array.
// Blank lines are skipped; a line that is not a JSON object is refused naming its number.
// The same caps as CSV.
Result<CsvTable> ParseJsonLines(std::string_view text, std::string_view source);
// CSV, or JSON Lines when the file's first non-blank byte is '{'.
Result<CsvTable> ReadCsvFile(const std::string& path);

// A Lifeline request log (docs/operations.md "Request log"): has outcome, e2e_ms and
// client_disconnected columns.
bool IsRequestLog(const CsvTable& t);
// Whether a request-log request tells of its user's patience: answered in full (outcome
// completed) or left by its client (cancelled, cancel_reason client_disconnect). Refusals,
// errors and shutdowns do not. The one rule RequestLogSessions, ReportFromRequestLog and the
// server's live economics (economics/live_economics.h) share.
bool IsUserOutcome(std::string_view outcome, std::string_view cancel_reason);
// The rows of a request log an abandonment analysis is about: requests answered in full
// (outcome completed) or left by their client (cancelled, cancel_reason client_disconnect);
// refusals, errors and shutdowns say nothing of a user's patience. Adds the columns
// `wait_ms` (the time to the first token, or, for a request that got none, the time the
// client waited until it left or the answer ended), and from the outcomes the application
// posted (`"event": "outcome"` lines, joined by the request id they name) `abandoned` (the
// latest posted abandoned / completed, else whether the client hung up), `clicked` and
// `converted` (0/1); names an empty class `unclassified`. InvalidArgument when no row is left.
Result<CsvTable> RequestLogSessions(const CsvTable& log);

// The 0-based index of a header column, or InvalidArgument naming the flag that chose it and
// listing the header.
Result<size_t> FindColumn(const CsvTable& t, std::string_view name, std::string_view flag);
// The same for a column that may be absent.
std::optional<size_t> ColumnIndex(const CsvTable& t, std::string_view name);

// Latencies: numbers in [0, kMaxLatencyMs].
inline constexpr double kMaxLatencyMs = 1e9;  // 11.6 days: anything larger is a unit mistake
Result<std::vector<double>> LatencyColumn(const CsvTable& t, size_t col);
// 0/1 outcomes: 0, 1, true, false (case-insensitive).
Result<std::vector<uint8_t>> BinaryColumn(const CsvTable& t, size_t col);
// Raw text cells (scenario, group ids); an empty cell is an error.
Result<std::vector<std::string>> TextColumn(const CsvTable& t, size_t col);

// InvalidArgument when every value of an outcome column is the same ("column 2 (abandoned):
// all 5000 rows (lines 2-5001) are 0; the fit needs both outcomes"). `what` names the subset
// (e.g. "scenario 'search'"), empty for the whole file.
Status RequireBothClasses(const CsvTable& t, size_t col, const std::vector<uint8_t>& values,
                          const std::vector<size_t>& rows, std::string_view what);

}  // namespace lifeline::analysis
