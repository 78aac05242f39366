#include "train/convert_weights.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>

#include "core/finite.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/model_tokenizer.h"
#include "serialize/hf_gpt2.h"
#include "serialize/hf_llama.h"
#include "serialize/json_document.h"
#include "serialize/llmc.h"
#include "train/gguf_export.h"

namespace lathe::train {

ConvertSummary convert_weights(const std::string& in, const std::string& out, const ConvertOptions& o) {
  LATHE_CHECK(o.to != serialize::WeightsFormat::checkpoint, "convert: a training checkpoint holds a run, not weights alone; "
              "write lathe, hf, llmc or gguf");
  LATHE_CHECK(!o.bf16 || o.to == serialize::WeightsFormat::llmc, "convert: bf16 is llm.c's version 5; it needs --to llmc");
  LATHE_CHECK(o.tokenizer.empty() || o.to == serialize::WeightsFormat::lathe || o.to == serialize::WeightsFormat::gguf,
              "convert: only lathe's weights file and GGUF hold a tokenizer; --tokenizer needs --to lathe or gguf");
  // Where the output goes is checked first: a refusal costs no conversion.
  const serialize::Existing existing = o.overwrite ? serialize::Existing::replace : serialize::Existing::refuse;
  if (o.to == serialize::WeightsFormat::hf) {
    serialize::check_model_directory_writable(out, o.overwrite);
  } else {
    struct stat st {};
    LATHE_CHECK(o.overwrite || ::lstat(out.c_str(), &st) != 0, out, " exists; give --overwrite to replace it, or "
                "choose another output");
  }
  serialize::LoadedModel loaded = serialize::load_model(in, Device::cpu());
  const nn::GPT& model = *loaded.model;
  // A NaN or an infinity in the weights would be carried into a file that another program loads
  // as a model (and that, with a tied head, computes NaN logits for every token).
  for (const auto& [name, p] : model.named_parameters()) {
    const int64_t at = first_non_finite(p);
    LATHE_CHECK(at < 0, in, ": tensor '", name, "' holds ", p.flatten().narrow(0, at, 1).item(), " at element ", at,
                " (of ", shape_str(p.shape()), "); refusing to convert weights that are not finite");
  }
  ConvertSummary summary{loaded.format, model.config(), model.num_params()};
  switch (o.to) {
    case serialize::WeightsFormat::hf:
      // GPT-2's block as GPT2LMHeadModel's directory, the modern one as LlamaForCausalLM's (or refused).
      if (serialize::is_gpt2_block(model.config())) serialize::write_hf_gpt2(out, model.config(), model.state_dict(), o.overwrite);
      else serialize::write_hf_llama(out, model.config(), model.state_dict(), o.overwrite);
      break;
    case serialize::WeightsFormat::llmc:
      serialize::write_llmc(out, model.config(), model.state_dict(), o.bf16 ? DType::bf16 : DType::f32, existing);
      break;
    case serialize::WeightsFormat::gguf: {
      gguf_architecture(model.config(), in);  // a model llama.cpp cannot compute is refused before the tokenizer is read
      const data::BpeTokenizer tok = data::model_tokenizer(loaded, in, o.tokenizer);
      std::filesystem::path stem(in);
      if (stem.filename().empty()) stem = stem.parent_path();
      // A model fine-tuned for chat takes its chat tokens along (checked against its tokenizer).
      std::optional<data::ChatTokens> chat;
      if (const auto t = loaded.metadata.find("chat_template"); t != loaded.metadata.end())
        chat = data::ChatTokens::from_json(serialize::parse_json_document(t->second, in + ": metadata \"chat_template\""),
                                           tok, in);
      write_gguf(out, model, tok, o.gguf_type, stem.stem().string(), existing, chat ? &*chat : nullptr);
      break;
    }
    case serialize::WeightsFormat::lathe:
    case serialize::WeightsFormat::checkpoint: {
      serialize::Metadata meta;
      const auto recorded = loaded.metadata.find("tokenizer");
      if (!o.tokenizer.empty()) {
        const data::BpeTokenizer tok = data::load_tokenizer(o.tokenizer);
        const int64_t ids =
            tok.identity().kind == "bytes" ? data::ByteTokenizer::kVocabSize : int64_t(tok.vocab_size());
        LATHE_CHECK(model.config().vocab_size >= ids, in, ": vocab_size ", model.config().vocab_size,
                    " is smaller than the ", ids, " ids of --tokenizer ", tok.identity().describe());
        meta["tokenizer"] = tok.identity().kind == "bytes" ? std::string("bytes") : tok.identity().to_json().dump();
      } else if (recorded != loaded.metadata.end()) {
        meta["tokenizer"] = recorded->second;
      }
      // A chat model stays one: its template goes along, if it fits the tokenizer the copy records.
      if (const auto t = loaded.metadata.find("chat_template"); t != loaded.metadata.end()) {
        const data::BpeTokenizer tok = data::model_tokenizer(loaded, in, o.tokenizer);
        data::ChatTokens::from_json(serialize::parse_json_document(t->second, in + ": metadata \"chat_template\""), tok,
                                    in);
        meta["chat_template"] = t->second;
      }
      meta["converted_from"] = nlohmann::json{{"format", serialize::weights_format_name(loaded.format)}, {"path", serialize::path_to_json(in)}}.dump();
      serialize::save_model(out, model, meta, existing);
      break;
    }
  }
  return summary;
}

}  // namespace lathe::train
