// The one writer of the Prometheus text exposition format (0.0.4) that every /metrics
// family goes through: the server's ledger and HTTP counters (api/server_metrics), the
// engine gauges (serving/serving_hub), the SLO histograms and gauges (slo/) and the
// vLLM-compatible and attainment families (serving/ops_metrics). One escaping of label
// values and one number format, so a model or class name with a quote cannot break a scrape.
//
// Thread-safety: pure functions.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace lifeline::prom {

// A label value with \, " and newline escaped.
std::string Escape(std::string_view label_value);
// Shortest round-trip decimal (integers below 2^53 print without a fraction), +Inf, -Inf, NaN.
std::string Number(double v);
// name1="value1",name2="value2" with the values escaped.
std::string Labels(std::initializer_list<std::pair<std::string_view, std::string_view>> kv);

// "# HELP name help" and "# TYPE name type" lines; once per family, before its samples.
void Family(std::string* out, std::string_view name, std::string_view type,
            std::string_view help);
// One sample line: name{labels} value (no braces when `labels` is empty; `labels` as built
// by Labels()).
void Sample(std::string* out, std::string_view name, std::string_view labels, double value);

}  // namespace lifeline::prom
