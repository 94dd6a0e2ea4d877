// Memory growth of the JSON Schema -> GBNF conversion on a wide object, under the meter of the
// client-input harnesses (alloc_meter.h: at most 64 x the input's size + 4 MiB more held at the
// peak). 5,000 required properties once held 560 MB for 0.6 s on the HTTP I/O thread (every
// suffix of the property sequence built as its own string) before the grammar was refused
// for its size. A binary of its own because the meter replaces the global operator new.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "text/grammar/json_schema.h"
#include "fuzz/alloc_meter.h"

int main() {
  for (int n : {100, 5000}) {
    nlohmann::ordered_json props = nlohmann::ordered_json::object();
    nlohmann::ordered_json required = nlohmann::ordered_json::array();
    for (int i = 0; i < n; ++i) {
      props["p" + std::to_string(i)] = {{"type", "string"}};
      required.push_back("p" + std::to_string(i));
    }
    const nlohmann::ordered_json schema = {{"type", "object"},
                                           {"properties", props},
                                           {"required", required},
                                           {"additionalProperties", false}};
    const std::string text = schema.dump();
    {
      // The request body as it arrives: its size is what the bound allows for.
      const lifeline::fuzz::GrowthScope growth(text.size(), "json_schema");
      auto gbnf = lifeline::grammar::JsonSchemaToGbnf(schema, {});
      if (!gbnf.ok()) {
        std::fprintf(stderr, "schema_growth_check: %s\n", gbnf.status().message().c_str());
        return 1;
      }
    }
    std::printf("schema_growth_check: %d required properties (%zu bytes): ok\n", n, text.size());
  }
  return 0;
}
