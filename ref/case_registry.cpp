#include "ref/case_registry.h"

#include "core/error.h"
#include "ref/kinds.h"
#include "serialize/json_document.h"

namespace lathe::ref {

const std::vector<CaseKind>& case_kinds() {
  static const std::vector<CaseKind> kinds = {
      {"op", run_op_case},
      {"gpt", run_gpt_case},
      {"optim", run_optim_case},
      {"train", run_train_case},
  };
  return kinds;
}

namespace {

// "gpt, optim or train"
std::string kind_names() {
  const auto& kinds = case_kinds();
  std::string out;
  for (size_t i = 0; i < kinds.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i].name;
  return out;
}

}  // namespace

RefOutput run_reference_case(const serialize::SafetensorsFile& c, Device device) {
  const std::string& case_path = c.path;
  auto it = c.metadata.find("case");
  LATHE_CHECK(it != c.metadata.end(), case_path, ": no \"case\" key in __metadata__");
  const nlohmann::json spec = serialize::parse_json_document(it->second, case_path + ": metadata \"case\"");
  LATHE_CHECK(spec.is_object() && spec.contains("kind") && spec["kind"].is_string(), case_path,
              ": the case document needs a string \"kind\"");
  const std::string kind = spec["kind"];
  try {
    for (const CaseKind& k : case_kinds())
      if (kind == k.name) return k.run(c, spec, device);
    LATHE_FAIL("unknown case kind \"", kind, "\" (expected ", kind_names(), ")");
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(case_path, ": malformed case document: ", e.what());
  } catch (const Error& e) {
    LATHE_FAIL(case_path, ": ", e.what());
  }
}

}  // namespace lathe::ref
