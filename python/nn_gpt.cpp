// lathe.GPT: the model of nn/gpt.h. Its parameters are the model's own tensors (a dict of handles:
// writing into one changes the model), its forward and generate are the C++ ones.
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <pybind11_json/pybind11_json.hpp>  // nlohmann::json <-> Python objects

#include "nn/gpt.h"
#include "python/bindings.h"

namespace lathe::python {

namespace {

// A preset's name or a dict of GPTConfig's fields (lathe.gpt_config("small") with some changed).
nn::GPTConfig config_arg(const py::object& c) {
  if (py::isinstance<py::dict>(c)) return nn::GPTConfig::from_json(c.cast<nlohmann::json>());
  return nn::GPTConfig::preset(c.cast<std::string>());
}


// model(idx, targets) and model.forward(idx, targets): (logits, the loss or None).
py::tuple forward(const nn::GPT& g, const Tensor& idx, const std::optional<Tensor>& targets) {
  nn::GPTOutput out;
  {
    py::gil_scoped_release nogil;
    out = g.forward(idx, targets.value_or(Tensor()));
  }
  return py::make_tuple(out.logits, out.loss.defined() ? py::cast(out.loss) : py::none());
}

}  // namespace

void bind_nn_gpt(py::module_& m) {
  m.def("gpt_presets", &nn::GPTConfig::preset_names, "The names lathe.GPT takes: tiny, small, char, ...");
  m.def("gpt_config", [](const std::string& preset) { return nn::GPTConfig::preset(preset).to_json(/*every_field=*/true); },
        py::arg("preset"), "A preset's fields as a dict, to change and hand to lathe.GPT");
  py::class_<nn::GPT, std::unique_ptr<nn::GPT>>(m, "GPT", "The GPT of nn/gpt.h (GPT-2's block or the modern one)")
      .def(py::init([](const py::object& config, uint64_t seed, const py::object& device) {
             const nn::GPTConfig c = config_arg(config);
             const Device d = device_arg(device);
             py::gil_scoped_release nogil;
             return std::make_unique<nn::GPT>(c, seed, d);
           }),
           py::arg("config"), py::kw_only(), py::arg("seed") = 0, py::arg("device") = "cpu",
           "config: a preset's name (lathe.gpt_presets()) or a dict of GPTConfig's fields")
      .def_property_readonly("config", [](const nn::GPT& g) { return g.config().to_json(/*every_field=*/true); })
      .def_property_readonly("device", &nn::GPT::device)
      .def("named_parameters", [](const nn::GPT& g) { return tensors_dict(g.named_parameters()); },
           "name -> the parameter itself (no copy), in the model's order")
      .def("parameters", &nn::GPT::parameters)
      .def("state_dict", [](const nn::GPT& g) { return tensors_dict(g.state_dict()); })
      .def("load_state_dict", [](nn::GPT& g, const std::map<std::string, Tensor>& state, bool strict) {
        g.load_state_dict(state, strict);
      }, ReleaseGil(), py::arg("state"), py::arg("strict") = true)
      .def("num_params", &nn::GPT::num_params, py::arg("exclude_position_embeddings") = false)
      .def("to", [](nn::GPT& g, const py::object& where) -> nn::GPT& {
        if (py::isinstance<DType>(where)) {
          const DType t = where.cast<DType>();
          py::gil_scoped_release nogil;
          g.to(t);
        } else {
          const Device d = device_arg(where);
          py::gil_scoped_release nogil;
          g.to(d);
        }
        return g;
      }, py::return_value_policy::reference_internal, py::arg("device_or_dtype"))
      .def("train", [](nn::GPT& g, bool on) -> nn::GPT& { g.train(on); return g; }, py::arg("mode") = true,
           py::return_value_policy::reference_internal)
      .def("eval", [](nn::GPT& g) -> nn::GPT& { g.eval(); return g; }, py::return_value_policy::reference_internal)
      .def_property_readonly("training", &nn::GPT::is_training)
      .def("zero_grad", &nn::GPT::zero_grad)
      .def_property("precision", [](const nn::GPT& g) { return std::string(nn::precision_name(g.precision())); },
                    [](nn::GPT& g, const std::string& p) { g.set_precision(nn::parse_precision(p)); },
                    "f32, bf16 or fp16: the dtype products and activations run in (the weights stay f32)")
      .def("forward", forward, py::arg("idx"), py::arg("targets") = py::none(),
           "(logits [B, T, vocab], the mean loss or None)")
      .def("__call__", forward, py::arg("idx"), py::arg("targets") = py::none())
      .def("loss", &nn::GPT::loss, ReleaseGil(), py::arg("idx"), py::arg("targets"))
      .def("generate",
           [](nn::GPT& g, const Tensor& idx, int64_t max_new_tokens, double temperature, int64_t top_k, double top_p,
              double min_p, double repetition_penalty, uint64_t seed, bool use_cache,
              const std::function<bool(std::vector<int64_t>)>& on_token) {
             nn::SamplingOptions s;
             s.temperature = temperature;
             s.top_k = top_k;
             s.top_p = top_p;
             s.min_p = min_p;
             s.repetition_penalty = repetition_penalty;
             nn::GPT::TokenCallback cb;
             // The callback is Python: it takes the GIL for each call, the sampling runs without it.
             if (on_token) cb = [&](const std::vector<int64_t>& next) {
               py::gil_scoped_acquire gil;
               return on_token(next);
             };
             py::gil_scoped_release nogil;
             return g.generate(idx, max_new_tokens, s, seed, use_cache, cb);
           },
           py::arg("idx"), py::arg("max_new_tokens"), py::kw_only(), py::arg("temperature") = 1.0,
           py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("min_p") = 0.0, py::arg("repetition_penalty") = 1.0,
           py::arg("seed") = 0, py::arg("use_cache") = true, py::arg("on_token") = nullptr,
           "idx [B, T] -> [B, T + max_new_tokens]; on_token(ids) after each step, False stops");
}

}  // namespace lathe::python
