// The JSON documents lathe reads from files and flags: checkpoint and weights metadata, model
// configs, reference cases, tokenizer files, shard manifests, metrics lines. One reader for all of
// them, so that every one is bounded the same way, and one way to quote a bad value in an error
// message.
//
// The reader is a SAX parse (nlohmann's sax_parse) into the document, so it takes time linear in
// the text: nlohmann's own parser with a callback (what lathe used before) erases every discarded
// value by a scan of its parent, quadratic in a parent's size. On the way it refuses what
// nlohmann would let pass silently: a key given twice in one object (nlohmann keeps the last), and
// nesting past kMaxJsonNesting. Each kind of document has a size limit (below), checked before the
// text is read or parsed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/json_value.h"

namespace lathe::serialize {

// Far deeper than any document lathe writes (its deepest is five levels). nlohmann's dump(),
// copies and comparisons recurse once per level, so a hostile document nested tens of thousands
// deep would overflow the stack long after parsing succeeded.
inline constexpr int kMaxJsonNesting = 64;

// Size limits, by kind of document (docs/design.md, "JSON documents"). A document inside a
// safetensors header (a checkpoint's or case's metadata) is bounded by the header's own limit
// (kMaxSafetensorsHeaderBytes, the reference implementation's 100 MB).
inline constexpr size_t kMaxJsonDocumentBytes = 100'000'000;   // any document, the largest limit
inline constexpr size_t kMaxConfigJsonBytes = size_t(1) << 20;  // --config files, config.json
inline constexpr size_t kMaxListJsonBytes = size_t(64) << 20;   // tokenizer files, encoder.json, shard manifests
inline constexpr size_t kMaxJsonLineBytes = size_t(1) << 20;    // one line of metrics.jsonl or a JSONL input

// Parses `text`. Throws lathe::Error "<what>: ..." when it is longer than `max_bytes`, is not JSON,
// names a key twice in one object, or nests deeper than kMaxJsonNesting; `what` names the file and
// field (e.g. "run/ckpt-00000020.safetensors: metadata \"lathe\"").
nlohmann::json parse_json_document(std::string_view text, const std::string& what,
                                   size_t max_bytes = kMaxJsonDocumentBytes);

// Reads and parses the file at `path`, which must be a regular file of at most `max_bytes` bytes
// (checked before anything is read). Errors start with `what` (e.g. "--config c.json").
nlohmann::json read_json_file(const std::string& path, const std::string& what, size_t max_bytes);

// quote_json and json_integer, for the readers of this layer's documents (core/json_value.h).
using lathe::json_integer;
using lathe::quote_json;

// A path in a document. Paths on Linux are bytes, not text: one that is valid UTF-8 is stored as a
// JSON string (as every path was before), any other as {"path_bytes": "<hex of its bytes>"}, so
// that a path with a byte such as 0xFF round-trips instead of failing the whole write.
nlohmann::json path_to_json(const std::string& path);
// The path back; `what` names the field in errors (a value that is neither form).
std::string path_from_json(const nlohmann::json& v, const std::string& what);

}  // namespace lathe::serialize
