#!/usr/bin/env python3
"""Byte-level BPE training written from the algorithm, and a check of `lathe tokenizer train`
against it (a ctest test: tests/CMakeLists.txt, tokenizer.train_reference).

    tools/bpe_train_reference.py train CORPUS --vocab-size N   print the merges, one "[l, r]" a line
    tools/bpe_train_reference.py check --lathe PATH             lathe's merges = these, on every corpus

The algorithm, as docs/tokenizer.md ("Training") states it: cut the text into pieces with GPT-2's
pattern; each distinct piece is a word of bytes, weighted by how often it occurs; count every
adjacent pair of tokens inside the words (the weights summed; "aaa" holds (a, a) twice); merge the
most frequent pair everywhere, left to right, into token 256 + i; repeat until N - 256 merges, or
no pair is left. Ties (equal counts) go to the smaller (left, right) ids. Each round counts every
pair again from scratch: slow, and nothing like lathe's heap of incrementally updated counts,
which is the point.

The pre-tokenizer must be the same on both sides. With the `regex` module (PCRE-style \\p{..}
classes) the pieces are cut by GPT-2's pattern as lathe spells it. Without it, Python's `re` runs a
transcription of the pattern ( \\p{L} as [^\\W\\d_], \\p{N} as \\d, \\s as \\s) that is exact only on the
characters of ALPHABET below (no other digits than 0-9, no letter that is not alphanumeric to
Python, no character that `re`'s \\s and White_Space disagree on); `check` refuses a corpus with any
other character, and where both modules are present it also shows the two cut every corpus alike.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile

try:
    import regex
except ImportError:
    regex = None

# GPT-2's pattern (tiktoken's r50k_base), with \s spelled as Unicode's White_Space, as lathe runs it.
GPT2 = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+"
        r"|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+")
# The same with `re`'s classes; exact on ALPHABET only.
GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"
ALPHABET = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
               " \t\n\r.,;:!?'\"-_()[]{}<>/\\|@#$%^&*+=~`"
               "éüßøñçЖжщЯяук日本語€£🙂🚀")


def pieces(text):
    """Piece -> count, the pieces as UTF-8 bytes."""
    if regex is not None:
        found = regex.findall(GPT2, text)
    else:
        outside = sorted(set(text) - ALPHABET)
        if outside:
            raise SystemExit(f"bpe_train_reference: without the regex module only ALPHABET is cut exactly; got {outside[:5]}")
        found = re.findall(GPT2_RE, text)
    assert "".join(found) == text, "the pattern left characters out"
    counts = {}
    for p in found:
        b = p.encode("utf-8")
        counts[b] = counts.get(b, 0) + 1
    return counts


def count_pairs(words):
    pair_count = {}
    for tokens, n in words:
        for pair in zip(tokens, tokens[1:]):
            pair_count[pair] = pair_count.get(pair, 0) + n
    return pair_count


def merge(words, pair, new):
    """Every occurrence of `pair` in `words` becomes token `new`, left to right."""
    for tokens, _ in words:
        i, out = 0, []
        while i < len(tokens):
            if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
                out.append(new)
                i += 2
            else:
                out.append(tokens[i])
                i += 1
        tokens[:] = out


def train(counts, vocab_size):
    """The merges, in order, and how many of them were chosen among pairs of equal count."""
    words = [(list(piece), n) for piece, n in counts.items()]
    merges, tied = [], 0
    while len(merges) < vocab_size - 256:
        pair_count = count_pairs(words)
        if not pair_count:
            break
        best = min(pair_count, key=lambda pair: (-pair_count[pair], pair))  # most frequent, then smallest
        tied += sum(1 for c in pair_count.values() if c == pair_count[best]) > 1
        merge(words, best, 256 + len(merges))
        merges.append(best)
    return merges, tied


def corpora():
    """name -> text: corpora built to hold many ties, bytes above 127 and runs of whitespace."""
    rng = random.Random(31)
    out = {}
    # Two letters: a handful of pairs whose counts keep meeting.
    out["two_letters"] = " ".join("".join(rng.choice("ab") for _ in range(rng.randint(1, 7))) for _ in range(600))
    # Every word once: every count ties with many others, and the order is the tie rule's alone.
    words = set()
    while len(words) < 300:
        words.add("".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 6))))
    out["each_once"] = " ".join(sorted(words))
    # Mirrored pairs with equal counts ((a, b) and (b, a); (x, y) and (y, x)), and runs of one letter
    # that hold overlapping pairs.
    out["mirrors"] = " ".join(["ab", "ba", "xy", "yx", "aaaa", "aaa", "bbbbbb", "abab", "baba"] * 40)
    # Bytes above 127: two-, three- and four-byte characters as letters and as punctuation.
    out["utf8"] = " ".join("".join(rng.choice("éüßøЖжщЯя日本語") for _ in range(rng.randint(1, 4)))
                           + rng.choice(["", "€", "🙂", "🚀£", "", ""]) for _ in range(400))
    # Whitespace runs: spaces, tabs and newlines between words, at the ends and alone.
    parts = []
    for _ in range(500):
        parts.append(rng.choice(["the", "cat", "sat", "on", "mat", "a", "1984", "42", "x1"]))
        parts.append(rng.choice([" ", "  ", "   ", "\t", " \t ", "\n", "\n\n", "  \n   ", "\r\n"]))
    out["whitespace"] = "".join(parts)
    # Everything at once, with contractions, digits and punctuation runs.
    mixed = ["it's", "we'll", "they're", "I'm", "don't", "you've", "he'd", "...", "!!", "(x)", "__init__",
             "3.14", "2026", "café", "Жук", "日本", "€5", "🙂🙂", " ", "\n", "\t\t"]
    out["mixed"] = " ".join(rng.choice(mixed) for _ in range(1500))
    return out


def lathe_merges(lathe, corpus, vocab_size, tmp):
    out = os.path.join(tmp, "tok.json")
    subprocess.run([lathe, "tokenizer", "train", "--data", corpus, "--vocab-size", str(vocab_size), "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return [tuple(m) for m in json.load(f)["merges"]]


def check(lathe):
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in corpora().items():
            assert set(text) <= ALPHABET, f"{name}: characters outside ALPHABET: {set(text) - ALPHABET}"
            if regex is not None:
                assert regex.findall(GPT2, text) == re.findall(GPT2_RE, text), f"{name}: `re` cuts it otherwise"
            counts = pieces(text)
            # 400 merges, or fewer where the pairs run out first (both sides stop there).
            vocab_size = 256 + 400
            want, ties = train(counts, vocab_size)
            path = os.path.join(tmp, name + ".txt")
            with open(path, "wb") as f:
                f.write(text.encode("utf-8"))
            got = lathe_merges(lathe, path, vocab_size, tmp)
            if got == want:
                print(f"{name}: {len(got)} merges in the reference's order ({ties} of them chosen by the tie rule), "
                      f"{len(text.encode('utf-8'))} bytes, {len(counts)} distinct pieces")
            else:
                failed += 1
                first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                print(f"FAIL {name}: lathe made {len(got)} merges, the reference {len(want)}; the first difference is "
                      f"merge {first}: lathe {got[first] if first < len(got) else None}, "
                      f"reference {want[first] if first < len(want) else None}")
    print("splitter:", "regex (GPT-2's pattern)" if regex is not None else "re (the transcription, on ALPHABET)")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="print the merges of a corpus (a UTF-8 text file)")
    t.add_argument("corpus")
    t.add_argument("--vocab-size", type=int, required=True)
    c = sub.add_parser("check", help="compare `lathe tokenizer train` with this reference on built corpora")
    c.add_argument("--lathe", required=True)
    a = ap.parse_args()
    if a.command == "train":
        with open(a.corpus, encoding="utf-8") as f:
            for left, right in train(pieces(f.read()), a.vocab_size)[0]:
                print(f"[{left}, {right}]")
        return 0
    return check(a.lathe)


if __name__ == "__main__":
    sys.exit(main())
