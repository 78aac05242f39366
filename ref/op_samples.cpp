#include "ref/op_samples.h"

#include "core/error.h"
#include "serialize/safetensors.h"

namespace lathe::ref {

std::string op_sample_case_name(const OpEntry& op, const OpSample& sample, DType dtype) {
  return sample_name(op, sample) + "." + dtype_name(dtype);
}

std::vector<OpSampleCase> op_sample_cases(const OpEntry& op, const OpSample& sample) {
  Draw draw = sample_draw(op, sample);
  const Operands drawn = sample.inputs(draw);
  // The result's shape, and whether it has a gradient, from a run in f64.
  Operands probe;
  for (const Tensor& t : drawn) probe.push_back(is_floating(t.dtype()) ? t.detach().requires_grad_(true) : t);
  const Tensor y = op.call(probe, read_op_args(op, sample.args));
  const Tensor grad_output = y.requires_grad() ? draw.uniform(y.shape()) : Tensor();
  std::vector<OpSampleCase> out;
  for (DType dtype : sample_dtypes(op, sample)) {
    OpSampleCase& c = out.emplace_back();
    c.name = op_sample_case_name(op, sample, dtype);
    c.dtype = dtype;
    c.document = {{"kind", "op"}, {"op", op.name}, {"args", sample.args}};
    for (size_t k = 0; k < drawn.size(); ++k) {
      const Tensor& t = drawn[k];
      c.tensors.emplace_back("input." + std::to_string(k), is_floating(t.dtype()) ? t.to(dtype) : t);
    }
    if (grad_output.defined()) c.tensors.emplace_back("grad_output", grad_output.to(dtype));
  }
  return out;
}

int64_t write_op_samples(const std::string& path) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json documents = nlohmann::json::object();
  for (const OpEntry& op : op_registry())
    for (const OpSample& sample : op.samples) {
      if (sample.use == SampleUse::sweep) continue;
      for (OpSampleCase& c : op_sample_cases(op, sample)) {
        for (auto& [name, t] : c.tensors) tensors.emplace_back(c.name + "/" + name, t);
        documents[c.name] = c.document;
      }
    }
  serialize::write_safetensors(path, tensors, {{"cases", documents.dump()}});
  return int64_t(documents.size());
}

}  // namespace lathe::ref
