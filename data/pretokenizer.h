// The pre-tokenizer of byte-level BPE: a regular expression cuts text into pieces (words with
// their leading space, runs of digits, punctuation, whitespace), and merges never cross a piece.
//
// The patterns are GPT-2's and GPT-4's (cl100k_base), as tiktoken spells them, run by PCRE2 with
// UTF and UCP (Unicode properties for \p{L}, \p{N}) and compiled with its JIT. One change of
// spelling: `\s` is written `\p{White_Space}`. Under UCP, PCRE2's \s also matches U+180E
// (MONGOLIAN VOWEL SEPARATOR, whitespace before Unicode 6.3); tiktoken's Rust regex follows the
// White_Space property, which no longer holds it. The property keeps the ids equal to tiktoken's.
//
// Invalid UTF-8: the patterns are compiled with PCRE2_MATCH_INVALID_UTF, so a match never starts
// or ends inside an invalid sequence and never includes one. Every maximal run of bytes no match
// covers (only invalid UTF-8 can be left over: the patterns match every valid character) becomes a
// piece of its own, which byte-level BPE encodes like any other. Nothing is replaced or dropped,
// so decode(encode(x)) == x for any bytes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::data {

enum class PretokenPattern { gpt2, gpt4 };

// Who runs the pattern: PCRE2's JIT (the default; several times faster) or its interpreter, which
// a build of PCRE2 without the JIT falls back to (and tests use to compare the two).
enum class RegexEngine { jit, interpreter };

// "gpt2" or "gpt4"; throws lathe::Error for another name.
PretokenPattern parse_pretoken_pattern(const std::string& name);
const char* pretoken_pattern_name(PretokenPattern p);
// The regular expression itself (in PCRE2's syntax).
const char* pretoken_pattern_regex(PretokenPattern p);

// A compiled pattern. Immutable after construction, so threads share one; each scan brings its
// own match data (see Scanner).
class Pretokenizer {
 public:
  // Asked for the JIT where PCRE2 cannot compile the pattern with it, the interpreter runs it,
  // said once per process on stderr.
  explicit Pretokenizer(PretokenPattern pattern, RegexEngine engine = RegexEngine::jit);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  PretokenPattern pattern() const { return pattern_; }
  RegexEngine engine() const { return engine_; }  // the one that runs, after any fallback

  // Calls piece(begin, end) for every piece of text[from, to), in order. `from` and `to` must be
  // piece boundaries of the whole text (0, text.size(), or a split point from split_points); the
  // regex still sees the text around them, so lookahead at `to` reads what follows.
  template <class OnPiece>
  void for_each_piece(std::string_view text, size_t from, size_t to, OnPiece&& piece) const;

  // Offsets in (0, text.size()) at which the text can be cut into independently pre-tokenized
  // parts: a '\n' followed by an ASCII letter is a piece boundary under both patterns (no
  // alternative matches a line break and a letter together). Returns up to `parts - 1` of them,
  // near equal spacing; fewer when the text has fewer such places.
  static std::vector<size_t> split_points(std::string_view text, size_t parts);

  // One scan's state: PCRE2 match data and a JIT stack. Not shared between threads.
  class Scanner {
   public:
    explicit Scanner(const Pretokenizer& p);
    ~Scanner();
    Scanner(const Scanner&) = delete;
    Scanner& operator=(const Scanner&) = delete;
    // The next match in text at or after `at`: true with [begin, end), false when none is left.
    bool next(std::string_view text, size_t at, size_t& begin, size_t& end);

   private:
    const Pretokenizer& p_;
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };

 private:
  PretokenPattern pattern_;
  RegexEngine engine_;
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

template <class OnPiece>
void Pretokenizer::for_each_piece(std::string_view text, size_t from, size_t to, OnPiece&& piece) const {
  Scanner scan(*this);
  size_t at = from, begin = 0, end = 0;
  while (at < to) {
    if (!scan.next(text, at, begin, end) || begin >= to) {
      piece(at, to);  // invalid UTF-8 up to the end
      return;
    }
    if (begin > at) piece(at, begin);  // invalid UTF-8 no match covers
    piece(begin, end);
    at = end;
  }
}

}  // namespace lathe::data
