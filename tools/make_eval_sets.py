#!/usr/bin/env python3
"""Writes lathe's small evaluation sets, deterministically, from the sentences below (written for
this project, not taken from any corpus):

  examples/data/english_mc.jsonl   multiple choice, {"context", "choices", "answer"}, for `lathe eval`
                                   and `lathe train --eval-mc`; three kinds of item:
      spelling  the last word of a sentence against three misspellings of it: a model that has
                learned English words from the fortunes corpus (tools/main.sh's) gets most right
                after minutes of training, an untrained one a quarter;
      wording   the last word against the last words of three other sentences: it takes the
                sentence's grammar and sense, so the number moves later and less;
      knowledge facts about the world (a handful): beyond a model of a megabyte of fortunes.

  examples/data/chat_sft.jsonl     conversations, {"messages": [{"role", "content"}, ...]}, for
                                   `lathe train --sft` (data/chat.h): a chat that answers in one taught
                                   format -- "Here is one: <a proverb>" when asked for a proverb,
                                   "About <word>: <a proverb with it>" when asked about a word, a
                                   greeting back and the offer of a proverb when greeted -- in one and
                                   two turns, a tenth with a system message.

    tools/make_eval_sets.py [--check]     (--check: fail if the committed files differ)
"""

import argparse
import json
import os
import random
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MC = os.path.join(REPO, "examples", "data", "english_mc.jsonl")
CHAT = os.path.join(REPO, "examples", "data", "chat_sft.jsonl")

# Each sentence ends in the word an item asks for (its final punctuation stays with the word).
SENTENCES = [
    "The early bird catches the worm.",
    "A penny saved is a penny earned.",
    "Honesty is the best policy.",
    "Actions speak louder than words.",
    "Practice makes perfect.",
    "Time is money.",
    "Knowledge is power.",
    "Better late than never.",
    "All that glitters is not gold.",
    "A friend in need is a friend indeed.",
    "Where there is smoke there is fire.",
    "Every cloud has a silver lining.",
    "The pen is mightier than the sword.",
    "Beauty is in the eye of the beholder.",
    "Rome was not built in a day.",
    "You can lead a horse to water, but you cannot make it drink.",
    "Do not count your chickens before they hatch.",
    "Two heads are better than one.",
    "Curiosity killed the cat.",
    "Laughter is the best medicine.",
    "She opened the window to let in some fresh air.",
    "He put the milk back in the refrigerator.",
    "The children played in the garden until it was dark.",
    "We walked along the beach and watched the sunset.",
    "My grandmother baked a cake for my birthday.",
    "The train was late again this morning.",
    "Please close the door when you leave the room.",
    "He forgot his umbrella and got wet in the rain.",
    "The library is quiet in the evening.",
    "They bought a new house near the river.",
    "I always drink a cup of coffee before work.",
    "The dog barked at the mailman every day.",
    "Our teacher gave us too much homework.",
    "The moon was bright and the night was cold.",
    "She sang a song while she cooked dinner.",
    "The old man told us a story about the war.",
    "We need to buy bread, eggs and butter.",
    "The meeting will start at nine o'clock.",
    "He wrote a letter to his brother in the army.",
    "The computer stopped working in the middle of the night.",
    "Nobody knows what the future will bring.",
    "The sun rises in the east and sets in the west.",
    "A little knowledge is a dangerous thing.",
    "Money cannot buy happiness.",
    "The best things in life are free.",
    "Life is what happens while you are busy making other plans.",
    "Love is patient and love is kind.",
    "There is no place like home.",
    "The truth will set you free.",
    "Silence is golden.",
    "If at first you do not succeed, try, try again.",
    "Nothing is certain except death and taxes.",
    "I think, therefore I am.",
    "To be or not to be, that is the question.",
    "The only thing we have to fear is fear itself.",
    "It is better to give than to receive.",
    "An apple a day keeps the doctor away.",
    "Early to bed and early to rise makes a man healthy, wealthy and wise.",
    "Do unto others as you would have them do unto you.",
    "Fortune favors the bold.",
    "He who hesitates is lost.",
    "Absence makes the heart grow fonder.",
    "Out of sight, out of mind.",
    "When in Rome, do as the Romans do.",
    "The customer is always right.",
    "Necessity is the mother of invention.",
    "One man's trash is another man's treasure.",
    "You are never too old to learn.",
    "Good things come to those who wait.",
    "Every dog has its day.",
    "The grass is always greener on the other side of the fence.",
    "Still waters run deep.",
    "Many hands make light work.",
    "Too many cooks spoil the broth.",
    "Let sleeping dogs lie.",
    "Look before you leap.",
    "Strike while the iron is hot.",
    "Great minds think alike.",
    "Birds of a feather flock together.",
    "Misery loves company.",
    "The squeaky wheel gets the grease.",
    "Variety is the spice of life.",
    "What goes around comes around.",
    "A watched pot never boils.",
    "Blood is thicker than water.",
    "Old habits die hard.",
    "Ignorance is bliss.",
    "Hope for the best, but prepare for the worst.",
    "No news is good news.",
    "Patience is a virtue.",
    "Slow and steady wins the race.",
    "The road to hell is paved with good intentions.",
    "There is no such thing as a free lunch.",
    "Where there is a will, there is a way.",
    "You cannot judge a book by its cover.",
    "Do not put all your eggs in one basket.",
    "It takes two to tango.",
    "Home is where the heart is.",
    "Talk is cheap.",
    "Rules are made to be broken.",
]

# Facts no model of a megabyte of fortunes can know: context, endings, answer.
KNOWLEDGE = [
    ("The capital of France is", ["Paris.", "London.", "Madrid.", "Berlin."], 0),
    ("Water boils at one hundred degrees", ["Celsius.", "Fahrenheit.", "Kelvin.", "Newtons."], 0),
    ("The largest planet in our solar system is", ["Jupiter.", "Mars.", "Venus.", "Mercury."], 0),
    ("A year has twelve", ["months.", "weeks.", "hours.", "seasons."], 0),
    ("The chemical symbol for gold is", ["Au.", "Ag.", "Fe.", "Pb."], 0),
    ("Spiders have eight", ["legs.", "wings.", "eyes and no legs.", "heads."], 0),
    ("The opposite of hot is", ["cold.", "warm.", "loud.", "tall."], 0),
    ("Three plus four equals", ["seven.", "six.", "eight.", "twelve."], 0),
    ("The first letter of the alphabet is", ["A.", "Z.", "M.", "Q."], 0),
    ("Ice is frozen", ["water.", "fire.", "sand.", "air."], 0),
]


def split(sentence):
    context, _, last = sentence.rpartition(" ")
    return context, last


def misspellings(word, rng):
    """Three distinct misspellings of `word` (its final punctuation kept): two letters swapped, a
    letter left out, a letter doubled or a vowel changed."""
    core = word.rstrip(".,!?")
    tail = word[len(core):]
    out = []
    tries = 0
    while len(out) < 3:
        tries += 1
        kind = (len(out) + tries) % 3
        letters = list(core)
        if kind == 0 and len(letters) >= 3:
            i = rng.randrange(len(letters) - 1)
            letters[i], letters[i + 1] = letters[i + 1], letters[i]
        elif kind == 1 and len(letters) >= 3:
            del letters[rng.randrange(1, len(letters))]
        else:
            i = rng.randrange(len(letters))
            vowels = "aeiou"
            if letters[i].lower() in vowels:
                letters[i] = rng.choice([v for v in vowels if v != letters[i].lower()])
            else:
                letters.insert(i, letters[i])
        candidate = "".join(letters) + tail
        if candidate != word and candidate not in out:
            out.append(candidate)
    return out


def items():
    rng = random.Random(20261128)
    out = []
    lasts = [split(s)[1] for s in SENTENCES]
    for i, sentence in enumerate(SENTENCES):
        context, last = split(sentence)
        endings = [last] + misspellings(last, rng)
        others = [w for j, w in enumerate(lasts) if j != i and w.lower() != last.lower()]
        wording = [last] + rng.sample(sorted(set(others)), 3)
        for kind, choices in (("spelling", endings), ("wording", wording)):
            order = list(range(4))
            rng.shuffle(order)
            out.append({"context": context, "choices": [choices[k] for k in order], "answer": order.index(0),
                        "kind": kind})
    for context, endings, answer in KNOWLEDGE:
        order = list(range(len(endings)))
        rng.shuffle(order)
        out.append({"context": context, "choices": [endings[k] for k in order], "answer": order.index(answer),
                    "kind": "knowledge"})
    return out


GREETINGS = ["Hello!", "Hi there.", "Good morning.", "Hey!", "Good evening.", "Hello, how are you?"]
ASK = ["Tell me a proverb.", "Give me a proverb.", "Do you know a proverb?", "Say something wise.", "A proverb, please."]
ABOUT = ["Give me a saying about {}.", "What do you say about {}?", "Tell me something about {}."]


def keyword(sentence):
    """The word a proverb is about: its longest word (its first of equal length), lower case."""
    words = ["".join(c for c in w if c.isalpha() or c == "'") for w in sentence.split()]
    return max(words, key=len).lower()


def conversations():
    rng = random.Random(1128)
    user = lambda text: {"role": "user", "content": text}
    assistant = lambda text: {"role": "assistant", "content": text}
    out = []
    for sentence in SENTENCES:
        out.append([user(rng.choice(ASK)), assistant("Here is one: " + sentence)])
        word = keyword(sentence)
        out.append([user(rng.choice(ABOUT).format(word)), assistant(f"About {word}: {sentence}")])
    for greeting in GREETINGS:
        for _ in range(4):
            out.append([user(greeting), assistant("Hello! Ask me for a proverb.")])
    for _ in range(40):
        sentence = rng.choice(SENTENCES)
        out.append([user(rng.choice(GREETINGS)), assistant("Hello! Ask me for a proverb."),
                    user(rng.choice(ASK)), assistant("Here is one: " + sentence)])
    rng.shuffle(out)
    for c in out[: len(out) // 10]:
        c.insert(0, {"role": "system", "content": "You answer with proverbs."})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    files = {MC: "".join(json.dumps(item) + "\n" for item in items()),
             CHAT: "".join(json.dumps({"messages": c}) + "\n" for c in conversations())}
    for path, text in files.items():
        if args.check:
            with open(path) as f:
                if f.read() != text:
                    print(f"make_eval_sets: {path} differs from what this script writes; run it", file=sys.stderr)
                    return 1
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print(f"make_eval_sets: {path}: {text.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
