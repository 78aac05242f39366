#include "data/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "core/error.h"

namespace lathe::data {

namespace {

// tiktoken's r50k_base (GPT-2) and cl100k_base (GPT-4) patterns, \s spelled \p{White_Space}
// (see the header).
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
    R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";
constexpr const char* kGpt4Regex =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\p{White_Space}\p{L}\p{N}]++[\r\n]*)"
    R"(|\p{White_Space}*[\r\n]|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

// The JIT's stack grows up to this: whitespace runs of megabytes backtrack through
// \s+(?!\S) without running out. The interpreter's backtracking heap gets the same bound (its
// default, 20 MB, is PCRE2's and not a choice of lathe's); past it, or past PCRE2's match limit,
// a match fails with PCRE2's message, naming the byte, instead of growing or running on.
constexpr size_t kJitStackMax = size_t(64) << 20;
constexpr uint32_t kInterpreterHeapKiB = uint32_t(kJitStackMax >> 10);

// The JIT stack of the thread that matches, made at its first match and kept until the thread
// ends. One per scanner was dear: a stack reserves kJitStackMax of address space, and giving it
// back frees its page tables, which cost more than encoding a short text (0.17 ms a call: 300,000
// one-word encodes took 50 s, most of it in the kernel). PCRE2 asks for it at each match through
// the context's callback, so a scanner made on one thread and used on another stays correct.
pcre2_jit_stack* thread_jit_stack(void*) {
  struct Owner {
    pcre2_jit_stack* stack = nullptr;
    ~Owner() { pcre2_jit_stack_free(stack); }
  };
  thread_local Owner owner;
  if (owner.stack == nullptr) owner.stack = pcre2_jit_stack_create(32 << 10, kJitStackMax, nullptr);
  return owner.stack;  // null (out of memory): PCRE2 uses its 32 KiB stack, and a long match fails, named
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Once per process: a PCRE2 without the JIT is slower, not wrong, so it is said and not refused.
void note_no_jit(int code) {
  static std::once_flag once;
  std::call_once(once, [code] {
    std::fprintf(stderr, "lathe: note: PCRE2 cannot compile the pre-tokenizer with its JIT (%s); its interpreter "
                 "runs it, several times slower\n", pcre2_message(code).c_str());
  });
}

}  // namespace

PretokenPattern parse_pretoken_pattern(const std::string& name) {
  if (name == "gpt2") return PretokenPattern::gpt2;
  if (name == "gpt4") return PretokenPattern::gpt4;
  LATHE_FAIL("unknown pre-tokenizer pattern '", name, "' (known: gpt2, gpt4)");
}

const char* pretoken_pattern_name(PretokenPattern p) { return p == PretokenPattern::gpt2 ? "gpt2" : "gpt4"; }

const char* pretoken_pattern_regex(PretokenPattern p) { return p == PretokenPattern::gpt2 ? kGpt2Regex : kGpt4Regex; }

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Pretokenizer::Pretokenizer(PretokenPattern pattern, RegexEngine engine)
    : pattern_(pattern), engine_(engine), compiled_(std::make_unique<Compiled>()) {
  int err = 0;
  PCRE2_SIZE at = 0;
  const char* regex = pretoken_pattern_regex(pattern);
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex), PCRE2_ZERO_TERMINATED,
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  LATHE_CHECK(compiled_->code != nullptr, "pre-tokenizer ", pretoken_pattern_name(pattern), ": PCRE2 cannot compile ",
              "the pattern at offset ", at, ": ", pcre2_message(err));
  if (engine_ == RegexEngine::jit) {
    if (const int rc = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE); rc != 0) {
      engine_ = RegexEngine::interpreter;
      note_no_jit(rc);
    }
  }
}

Pretokenizer::~Pretokenizer() = default;

struct Pretokenizer::Scanner::Impl {
  pcre2_match_data* match = nullptr;
  pcre2_match_context* context = nullptr;
  ~Impl() {
    pcre2_match_data_free(match);
    pcre2_match_context_free(context);
  }
};

Pretokenizer::Scanner::Scanner(const Pretokenizer& p) : p_(p), impl_(std::make_unique<Impl>()) {
  impl_->match = pcre2_match_data_create_from_pattern(p.compiled_->code, nullptr);
  impl_->context = pcre2_match_context_create(nullptr);
  LATHE_CHECK(impl_->match && impl_->context, "pre-tokenizer: out of memory for PCRE2's match data");
  if (p.engine() == RegexEngine::jit) {
    pcre2_jit_stack_assign(impl_->context, thread_jit_stack, nullptr);
  } else {
    pcre2_set_heap_limit(impl_->context, kInterpreterHeapKiB);
  }
}

Pretokenizer::Scanner::~Scanner() = default;

bool Pretokenizer::Scanner::next(std::string_view text, size_t at, size_t& begin, size_t& end) {
  // With PCRE2_MATCH_INVALID_UTF the subject is never checked as a whole (which would cost a pass
  // over the text per call); invalid sequences just never match.
  const int rc = pcre2_match(p_.compiled_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at, 0,
                             impl_->match, impl_->context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  LATHE_CHECK(rc > 0, "pre-tokenizer ", pretoken_pattern_name(p_.pattern()), ": PCRE2 failed at byte ", at, ": ",
              pcre2_message(rc));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(impl_->match);
  begin = ov[0];
  end = ov[1];
  LATHE_CHECK(end > begin, "pre-tokenizer: empty match at byte ", begin);  // the patterns cannot match ""
  return true;
}

std::vector<size_t> Pretokenizer::split_points(std::string_view text, size_t parts) {
  std::vector<size_t> points;
  if (parts < 2) return points;
  const size_t step = text.size() / parts;
  size_t from = 0;
  for (size_t k = 1; k < parts; ++k) {
    size_t at = std::max(from + 1, k * step);
    for (; at < text.size(); ++at) {
      const char c = text[at];
      if (text[at - 1] == '\n' && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) break;
    }
    if (at >= text.size()) break;
    points.push_back(at);
    from = at;
  }
  return points;
}

}  // namespace lathe::data
