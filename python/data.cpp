// Data from Python: tokenizers (data/bpe_tokenizer.h: load by name or file, encode, decode, train),
// token shards written from a corpus (data/tokenize_corpus.h), and lathe.Dataset, the interface a
// training run draws its batches through (data/dataset.h: a byte corpus or token shards alike).
#include <pybind11/stl.h>

#include "data/bpe_tokenizer.h"
#include "data/bpe_trainer.h"
#include "data/dataset.h"
#include "data/text_corpus.h"
#include "data/tokenize_corpus.h"
#include "data/tokenizer_file.h"
#include "python/bindings.h"

namespace lathe::python {

namespace {

// Text as str (encoded as UTF-8) or bytes (as they are: a byte-level tokenizer takes any bytes).
std::string text_arg(const py::handle& h) {
  if (py::isinstance<py::bytes>(h)) return h.cast<std::string>();
  if (py::isinstance<py::str>(h)) return h.cast<std::string>();
  throw py::type_error("expected str or bytes, got " + std::string(py::str(py::type::of(h))));
}

// Ids as a list of ints or an integer tensor; each checked against the vocabulary by decode.
std::vector<uint32_t> ids_arg(const data::BpeTokenizer& tok, const py::handle& h) {
  std::vector<int64_t> ids = py::isinstance<Tensor>(h) ? h.cast<Tensor>().to_vector<int64_t>() : h.cast<std::vector<int64_t>>();
  std::vector<uint32_t> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    LATHE_CHECK(id >= 0 && uint64_t(id) < tok.vocab_size(), "decode: id ", id, " is outside the tokenizer's ",
                tok.vocab_size(), " ids (", tok.identity().to_json().dump(), ")");
    out.push_back(uint32_t(id));
  }
  return out;
}

data::Split split_arg(const std::string& s) {
  if (s == "train") return data::Split::train;
  if (s == "val") return data::Split::val;
  throw py::value_error("split must be \"train\" or \"val\", got \"" + s + "\"");
}

}  // namespace

void bind_data(py::module_& m) {
  py::class_<data::BpeTokenizer>(m, "Tokenizer",
                                 "A byte-level BPE tokenizer: \"bytes\", \"gpt2\", a GPT-2 vocab.bpe, or a file of "
                                 "lathe.train_tokenizer / `lathe tokenizer train`")
      .def(py::init([](const std::string& spec) {
             py::gil_scoped_release nogil;
             return data::load_tokenizer(spec);
           }),
           py::arg("name_or_path"))
      .def_property_readonly("vocab_size", &data::BpeTokenizer::vocab_size, "ids, end-of-text included")
      .def_property_readonly("end_of_text", &data::BpeTokenizer::end_of_text)
      .def_property_readonly("identity", [](const data::BpeTokenizer& t) { return t.identity().to_json().dump(); })
      .def("encode", [](const data::BpeTokenizer& t, const py::object& text, int threads) {
        const std::string bytes = text_arg(text);
        std::vector<uint32_t> ids;
        {
          py::gil_scoped_release nogil;
          ids = t.encode(bytes, threads);
        }
        return std::vector<int64_t>(ids.begin(), ids.end());
      }, py::arg("text"), py::arg("threads") = 1, "ids of str or bytes; end-of-text is never produced")
      .def("decode", [](const data::BpeTokenizer& t, const py::object& ids) {
        const std::string bytes = t.decode(ids_arg(t, ids));
        return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(bytes.data(), py::ssize_t(bytes.size()), "replace"));
      }, py::arg("ids"), "text of ids (list or tensor); bytes that are not UTF-8 become U+FFFD")
      .def("decode_bytes", [](const data::BpeTokenizer& t, const py::object& ids) {
        return py::bytes(t.decode(ids_arg(t, ids)));
      }, py::arg("ids"), "the bytes of ids, as they are");

  m.def("train_tokenizer", [](const std::string& data, uint64_t vocab_size, const std::string& out,
                              const std::string& pattern) {
        const data::PretokenPattern p = data::parse_pretoken_pattern(pattern);
        py::gil_scoped_release nogil;
        const data::TrainedTokenizer trained = data::train_tokenizer(data::TextCorpus::open(data), vocab_size, p);
        data::write_tokenizer_file(out, trained.file);
        return data::load_tokenizer(out);
      }, py::arg("data"), py::arg("vocab_size"), py::arg("out"), py::kw_only(), py::arg("pattern") = "gpt2",
      "Learns merges on a corpus (a file or a directory), writes the tokenizer file `out` and returns it");

  m.def("tokenize_corpus", [](const data::BpeTokenizer& tok, const std::string& data, const std::string& out,
                              size_t shard_tokens, int threads, bool overwrite) {
        data::ShardManifest manifest;
        {
          py::gil_scoped_release nogil;
          manifest = data::tokenize_corpus(tok, data, out, shard_tokens, threads, nullptr, overwrite);
        }
        py::dict d;
        d["documents"] = manifest.documents;
        d["tokens"] = manifest.tokens;
        d["text_bytes"] = manifest.text_bytes;
        d["shards"] = manifest.shards.size();
        return d;
      }, py::arg("tokenizer"), py::arg("data"), py::arg("out"), py::kw_only(),
      py::arg("shard_tokens") = data::kDefaultShardTokens, py::arg("threads") = 0, py::arg("overwrite") = false,
      "Token shards (llm.c's format) of a corpus in directory `out`, written whole or not at all");

  py::class_<data::Dataset>(m, "Dataset", "What a training run draws batches from: a byte corpus or token shards")
      .def(py::init([](const std::string& path, int64_t block_size) {
             py::gil_scoped_release nogil;
             return data::open_dataset(path, block_size);
           }),
           py::arg("path"), py::arg("block_size"))
      .def_property_readonly("block_size", &data::Dataset::block_size)
      .def_property_readonly("kind", &data::Dataset::kind)
      .def_property_readonly("unit", &data::Dataset::unit)
      .def("__len__", &data::Dataset::stream_size)
      .def("split_size", [](const data::Dataset& d, const std::string& s) { return d.split_size(split_arg(s)); },
           py::arg("split"))
      .def("describe", &data::Dataset::describe)
      .def_property_readonly("vocab_size", [](const data::Dataset& d) { return d.tokenizer().vocab_size(); })
      .def("decode", [](const data::Dataset& d, const std::vector<int64_t>& ids) { return py::bytes(d.tokenizer().decode(ids)); },
           py::arg("ids"))
      .def("sample", [](const data::Dataset& d, const std::string& split, int64_t batch, Generator& gen,
                        const py::object& device) {
        const data::Split s = split_arg(split);
        const Device dev = device_arg(device);
        data::Batch b;
        {
          py::gil_scoped_release nogil;
          b = d.sample(s, batch, gen, dev);
        }
        return py::make_tuple(b.x, b.y);
      }, py::arg("split"), py::arg("batch"), py::arg("generator"), py::kw_only(), py::arg("device") = "cpu",
      "(x, y): batch windows of the split, i64 [batch, block_size], y shifted by one; the generator advances");
}

}  // namespace lathe::python
