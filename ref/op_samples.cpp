#include "ref/op_samples.h"

#include "core/error.h"
#include "serialize/safetensors.h"

namespace lathe::ref {

std::string op_sample_case_name(const OpEntry& op, const OpSample& sample, DType dtype) {
  return sample_name(op, sample) + "." + dtype_name(dtype);
}

OpSampleCase op_sample_case(const OpEntry& op, const OpSample& sample, DType dtype) {
  OpSampleCase c;
  c.name = op_sample_case_name(op, sample, dtype);
  c.document = {{"kind", "op"}, {"op", op.name}, {"args", sample.args}};
  Draw draw = sample_draw(op, sample);
  const Operands drawn = sample.inputs(draw);
  // The result's shape, and whether it has a gradient, from a run in f64.
  Operands probe;
  for (const Tensor& t : drawn) probe.push_back(is_floating(t.dtype()) ? t.detach().requires_grad_(true) : t);
  const Tensor y = op.call(probe, read_op_args(op, sample.args));
  for (size_t k = 0; k < drawn.size(); ++k) {
    const Tensor& t = drawn[k];
    c.tensors.emplace_back("input." + std::to_string(k), is_floating(t.dtype()) ? t.to(dtype) : t);
  }
  if (y.requires_grad()) c.tensors.emplace_back("grad_output", draw.uniform(y.shape()).to(dtype));
  return c;
}

int64_t write_op_samples(const std::string& path) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json documents = nlohmann::json::object();
  for (const OpEntry& op : op_registry())
    for (const OpSample& sample : op.samples) {
      if (sample.use == SampleUse::sweep) continue;
      for (DType dtype : sample_dtypes(op, sample)) {
        OpSampleCase c = op_sample_case(op, sample, dtype);
        for (auto& [name, t] : c.tensors) tensors.emplace_back(c.name + "/" + name, t);
        documents[c.name] = c.document;
      }
    }
  serialize::write_safetensors(path, tensors, {{"cases", documents.dump()}});
  return int64_t(documents.size());
}

}  // namespace lathe::ref
