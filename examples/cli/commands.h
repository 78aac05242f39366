// The subcommands of the `lathe` program. Each lives in its own file and registers itself on the
// CLI11 app; main.cpp only calls these and maps errors to exit codes.
//
// Exit codes: 0 success; 1 runtime error (bad data, damaged file, ...); 2 usage error (a bad flag
// or value). A command reports a usage error by throwing UsageError.
#pragma once

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "core/error.h"
#include "nn/gpt.h"
#include "nn/sampling.h"
#include "serialize/safetensors.h"

namespace lathe::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A command that ran to its end with a negative answer (`ref --check`: a tensor differs) exits
// with status 1 after its report, which already said why: no error line follows.
struct NegativeVerdict {};

// A check for an input file option: the path names something stat(2) can reach. Unlike
// CLI::ExistingFile, which calls every failure "File does not exist", it gives the reason (a loop
// of symbolic links, no permission); what the file is, the reader checks when it opens it.
inline CLI::Validator reachable_path() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0) return "";
        return path + ": " + std::strerror(errno);
      },
      "FILE");
}

// The check of --attention-backward (train, bench): core's own parser (core/backend.h), so that the
// names are listed there only.
inline CLI::Validator attention_backward_check() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        try {
          parse_attention_backward(name);
          return "";
        } catch (const Error& e) {
          return e.what();
        }
      },
      "NAME");
}

// The sampling flags that `sample` and `chat` share (nn/sampling.h has their definitions):
// --top-p, --min-p, --repetition-penalty, --repetition-window.
void add_sampling_flags(CLI::App& cmd, double& top_p, double& min_p, double& repetition_penalty,
                        int64_t& repetition_window);
// nn::SamplingOptions::validate's message ("sample: top_p must ...") in the flags' names.
std::string sampling_flag_message(const std::string& what);
// The sampling options that `sample`'s or `chat`'s flags give, validated: an error is a usage error
// naming the flag.
template <class Flags>
nn::SamplingOptions sampling_from_flags(const Flags& o) {
  nn::SamplingOptions sampling;
  sampling.temperature = o.temperature;
  sampling.top_k = o.top_k;
  sampling.top_p = o.top_p;
  sampling.min_p = o.min_p;
  sampling.repetition_penalty = o.repetition_penalty;
  sampling.repetition_window = o.repetition_window;
  try {
    sampling.validate();
  } catch (const Error& e) {
    throw UsageError(sampling_flag_message(e.what()));
  }
  return sampling;
}

void add_info_command(CLI::App& app);
void add_ref_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_sample_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_tokenizer_command(CLI::App& app);  // tokenizer train | encode | decode | bench
void add_tokenize_command(CLI::App& app);
void add_convert_command(CLI::App& app);  // lathe convert IN OUT [--to lathe|hf|llmc]
void add_eval_command(CLI::App& app);
void add_chat_command(CLI::App& app);     // lathe chat --checkpoint MODEL (after lathe train --sft)     // lathe eval --checkpoint MODEL --mc FILE | --text FILE

}  // namespace lathe::cli
