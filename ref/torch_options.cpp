#include "ref/torch_options.h"

#include "core/error.h"
#include "serialize/json_document.h"

namespace lathe::ref {

nlohmann::json without_implementation_options(const nlohmann::json& options, bool fused, const std::string& where) {
  if (!options.is_object()) return options;
  nlohmann::json out = options;
  auto flag_or_null = [&](const char* key) {
    const nlohmann::json& v = options[key];
    LATHE_CHECK(v.is_boolean() || v.is_null(), where, ": \"", key, "\" must be true, false or null, got ",
                serialize::quote_json(v));
  };
  for (const char* key : {"foreach", "capturable"}) {
    if (!options.contains(key)) continue;
    flag_or_null(key);  // the same step either way
    out.erase(key);
  }
  if (options.contains("differentiable")) {
    flag_or_null("differentiable");
    LATHE_CHECK(options["differentiable"] != true, where,
                ": \"differentiable\": true asks for a step autograd can go through; lathe's optimizers step outside autograd");
    out.erase("differentiable");
  }
  if (options.contains("fused")) {
    flag_or_null("fused");
    LATHE_CHECK(options["fused"].is_null() || options["fused"] == fused, where, ": \"fused\" is ",
                options["fused"].dump(), " but the case's optimizer is ", fused ? "fused" : "not fused",
                " (a whole optimizer is fused or not; say so with the case's \"fused\")");
    out.erase("fused");
  }
  if (options.contains("initial_lr")) {
    LATHE_CHECK(options["initial_lr"].is_number(), where, ": \"initial_lr\" must be a number, got ",
                serialize::quote_json(options["initial_lr"]));
    out.erase("initial_lr");  // an LR scheduler's starting point; the step reads "lr"
  }
  return out;
}

}  // namespace lathe::ref
