// The sampling flags of `lathe sample` and `lathe chat`, declared once.
#include <regex>

#include "examples/cli/commands.h"

namespace lathe::cli {

void add_sampling_flags(CLI::App& cmd, double& top_p, double& min_p, double& repetition_penalty,
                        int64_t& repetition_window) {
  cmd.add_option("--top-p", top_p,
                 "nucleus sampling: draw among the fewest most likely tokens whose probability sums to at least P, "
                 "in (0, 1]; 1: off")
      ->capture_default_str();
  cmd.add_option("--min-p", min_p,
                 "draw among the tokens at least P times as likely as the most likely one, in [0, 1]; 0: off")
      ->capture_default_str();
  cmd.add_option("--repetition-penalty", repetition_penalty,
                 "divide the positive logits of tokens already in the text by this and multiply the negative ones "
                 "(CTRL's penalty, as transformers and llama.cpp); 1: off")
      ->capture_default_str();
  cmd.add_option("--repetition-window", repetition_window,
                 "the last N tokens the penalty looks at; 0: the whole text (transformers; llama.cpp uses 64)")
      ->capture_default_str();
}

std::string sampling_flag_message(const std::string& what) {
  // "sample: top_p must ..." -> "--top-p must ..."
  static const std::regex field(R"(^sample: (top_p|min_p|repetition_penalty|repetition_window|temperature|top_k))");
  std::smatch m;
  if (!std::regex_search(what, m, field)) return what;
  std::string flag = "--" + m[1].str();
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag + what.substr(size_t(m.length(0)));
}

}  // namespace lathe::cli
