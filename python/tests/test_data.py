"""Tokenizers, token shards and datasets from Python: data/ as the trainer sees it."""
import os

import pytest

import lathe

CORPUS = os.path.join(os.environ["LATHE_SOURCE_DIR"], "README.md")


def test_the_byte_tokenizer_and_gpt2s():
    b = lathe.Tokenizer("bytes")
    assert b.vocab_size == 257 and b.end_of_text == 256
    assert b.encode("hé") == [104, 195, 169] and b.decode([104, 195, 169]) == "hé"
    assert b.decode_bytes([255]) == b"\xff" and b.decode([255]) == "\ufffd"
    g = lathe.Tokenizer("gpt2")
    assert g.vocab_size == 50257 and g.encode("Hello world") == [15496, 995]
    assert g.decode(lathe.tensor([15496, 995])) == "Hello world"


def test_a_tokenizer_trained_from_python_round_trips_its_corpus(tmp_path):
    path = str(tmp_path / "tok.json")
    tok = lathe.train_tokenizer(CORPUS, 320, path)
    assert tok.vocab_size == 321 and os.path.exists(path)
    text = open(CORPUS, encoding="utf-8").read()
    ids = tok.encode(text, threads=2)
    assert tok.decode(ids) == text and len(ids) < len(text.encode()) * 0.8
    assert lathe.Tokenizer(path).encode(text[:500]) == ids[:len(lathe.Tokenizer(path).encode(text[:500]))]


def test_token_shards_and_a_byte_corpus_give_batches_the_same_way(tmp_path):
    tok = lathe.train_tokenizer(CORPUS, 300, str(tmp_path / "tok.json"))
    stats = lathe.tokenize_corpus(tok, CORPUS, str(tmp_path / "shards"), shard_tokens=4096, threads=1)
    assert stats["documents"] == 1 and stats["shards"] >= 2
    shards = lathe.Dataset(str(tmp_path / "shards"), 16)
    assert shards.kind == "token shards" and len(shards) == stats["tokens"] and shards.vocab_size == 301
    corpus = lathe.Dataset(CORPUS, 16)
    assert corpus.kind == "corpus" and corpus.unit == "bytes" and len(corpus) == os.path.getsize(CORPUS)
    for data in (shards, corpus):
        x, y = data.sample("train", 4, lathe.Generator(seed=3))
        assert x.shape == (4, 16) and x.dtype == lathe.i64
        assert x[:, 1:].tolist() == y[:, :-1].tolist()
        x2, _ = data.sample("train", 4, lathe.Generator(seed=3), device="sim")
        assert str(x2.device) == "sim:0" and x2.cpu().tolist() == x.tolist()
    assert shards.split_size("train") + shards.split_size("val") == len(shards)


def test_bad_data_says_which_file_and_what():
    with pytest.raises(lathe.Error, match="/nowhere/tok.json"):
        lathe.Tokenizer("/nowhere/tok.json")
    with pytest.raises(lathe.Error, match="id 300 is outside"):
        lathe.Tokenizer("bytes").decode([300])
    with pytest.raises(lathe.Error, match="/nowhere"):
        lathe.Dataset("/nowhere", 16)
    with pytest.raises(ValueError, match="split"):
        lathe.Dataset(CORPUS, 16).sample("test", 1, lathe.Generator())
    with pytest.raises(TypeError):
        lathe.Tokenizer("bytes").encode(3)


def test_a_dataset_describes_itself():
    assert "README.md" in lathe.Dataset(CORPUS, 16).describe()
