#!/usr/bin/env python3
"""Rewrites one CUDA source of cuda/ into C++ that the host compiler builds against shim/
(cuda/emulator/README.md). Run by the build for every file of cuda/, so an edited kernel is
emulated again by `cmake --build`:

    rewrite_cuda.py IN OUT

Three constructs are not C++ and change; everything else stays as written, line for line, after a
`#line 1 "IN"` (so the compiler's messages, and the race detector's reports, point at the original
file and line):

  kernel<<<grid, block[, shmem[, stream]]>>>(args);
      -> ::emu::launch("kernel", ::emu::LaunchConfig(grid, block[, shmem[, stream]]),
                       [&](auto&&... a) { kernel(a...); }, args);
         the arguments are evaluated once and copied, as a launch does;
  extern __shared__ [__align__(N)] T name[];
      -> T* name = ::emu::dynamic_shared<T>();    the launch's shmem bytes;
  __shared__ [__align__(N)] T name[dims], ...;
      -> T (&name)[dims] = ::emu::block_shared<T[dims], ID>(); ...
         one buffer per declaration, filled with NaN bytes when each block starts, so a read of
         a value no thread of this block wrote shows up. A declaration it cannot parse keeps
         __shared__, which shim/emu_core.h defines as `static` (shared, but not refilled).
"""
import os
import re
import sys
import zlib

IDENT = re.compile(r'[A-Za-z_][\w]*')


def fail(path, text, pos, what):
    line = text.count('\n', 0, pos) + 1
    sys.exit(f'{path}:{line}: rewrite_cuda.py: {what}')


def match_close(text, pos, open_ch, close_ch):
    """Index just past the bracket that closes text[pos] (== open_ch), skipping nested ones."""
    depth = 0
    i = pos
    while i < len(text):
        c = text[i]
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def kernel_start(text, end):
    """Start of the kernel expression that ends at `end` (just before <<<): a qualified name with
    optional template arguments, e.g. `ns::kernel<T, 4>`."""
    i = end
    if i > 0 and text[i - 1] == '>':  # template arguments: walk back to the matching '<'
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == '>':
                depth += 1
            elif text[i] == '<':
                depth -= 1
                if depth == 0:
                    break
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in '_:'):
        i -= 1
    return i


def split_top_level(s):
    """Splits s at commas outside (), [], <> and {}."""
    parts, depth, cur = [], 0, ''
    for c in s:
        if c in '([<{':
            depth += 1
        elif c in ')]>}':
            depth -= 1
        if c == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += c
    parts.append(cur)
    return parts


def rewrite_launches(path, text):
    out, pos = [], 0
    while True:
        at = text.find('<<<', pos)
        if at < 0:
            out.append(text[pos:])
            return ''.join(out)
        start = kernel_start(text, at)
        kernel = text[start:at].strip()
        if not kernel:
            fail(path, text, at, 'a launch without a kernel name before <<<')
        cfg_end = text.find('>>>', at)
        if cfg_end < 0:
            fail(path, text, at, 'a launch without >>>')
        cfg = text[at + 3:cfg_end]
        paren = cfg_end + 3
        while paren < len(text) and text[paren].isspace():
            paren += 1
        if paren >= len(text) or text[paren] != '(':
            fail(path, text, at, 'a launch without its argument list')
        args_end = match_close(text, paren, '(', ')')
        if args_end < 0:
            fail(path, text, at, 'unbalanced parentheses in a launch')
        args = text[paren + 1:args_end - 1]
        name = ' '.join(kernel.split()).replace('"', '')
        call = (f'::emu::launch("{name}", ::emu::LaunchConfig({cfg}), '
                f'[&](auto&&... emu_args) {{ {kernel}(emu_args...); }}')
        if args.strip():
            call += f', {args}'
        call += ')'
        out.append(text[pos:start])
        out.append(call)
        pos = args_end
    return text


ALIGN = r'(?:__align__\s*\(\s*\d+\s*\)\s*)?'
EXTERN_SHARED = re.compile(r'extern\s+__shared__\s+' + ALIGN + r'([^;\[\]]+?)\s+(\w+)\s*\[\s*\]\s*;')
STATIC_SHARED = re.compile(r'(?<![\w])__shared__\s+' + ALIGN + r'([^;=()]+?);')
DECLARATOR = re.compile(r'^\s*(\w+)\s*((?:\[[^\[\]]+\]\s*)*)$')


def rewrite_shared(path, text):
    text = EXTERN_SHARED.sub(lambda m: f'{m.group(1)}* {m.group(2)} = ::emu::dynamic_shared<{m.group(1)}>();', text)
    salt = zlib.crc32(path.split('/')[-1].encode()) & 0xffffffff
    counter = [0]

    def static(m):
        line_start = text.rfind('\n', 0, m.start()) + 1
        if '//' in text[line_start:m.start()] or '/*' in text[line_start:m.start()]:
            return m.group(0)  # a comment that names __shared__
        # The type is everything before the first declarator: `C sw[4][32], sb[4][32]`.
        first = split_top_level(m.group(1))
        head = first[0].split('[')[0]
        names = list(IDENT.finditer(head))
        if len(names) < 2:
            return m.group(0)
        name_at = names[-1].start()
        type_ = head[:name_at].strip()
        declarators = [first[0][name_at:]] + first[1:]
        decls = []
        for d in declarators:
            dm = DECLARATOR.match(d)
            if not dm or not type_:
                return m.group(0)
            ident, dims = dm.group(1), ''.join(dm.group(2).split())
            key = (salt << 16) | counter[0]
            counter[0] += 1
            full = f'{type_}{dims}'
            decls.append(f'{type_} (&{ident}){dims} = ::emu::block_shared<{full}, {key}ull>();'
                         if dims else f'{type_}& {ident} = ::emu::block_shared<{full}, {key}ull>();')
        return ' '.join(decls)

    return STATIC_SHARED.sub(static, text)


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: rewrite_cuda.py IN OUT')
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding='utf-8') as f:
        text = f.read()
    text = rewrite_shared(src, rewrite_launches(src, text))
    text = '#line 1 "%s"\n' % os.path.abspath(src).replace('\\', '/') + text
    # Ninja makes an output's folder before running its command; Make does not.
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    with open(dst, 'w', encoding='utf-8') as f:
        f.write(text)


if __name__ == '__main__':
    main()
