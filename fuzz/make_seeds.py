#!/usr/bin/env python3
"""Seeds for the artifact fuzz targets, from artifacts qcc compiled.

    fuzz/make_seeds.py OUT_DIR [--only=FUNCTION] NAME=ARTIFACT.qpkg ...
    fuzz/make_seeds.py --keep-data OUT_DIR NAME=ARTIFACT.qpkg ...

For each artifact: keeps the manifest's structure (values, nodes, kernel
regions, launch records, kv_cache), optionally only the entry point named by
--only (and its GPU plan and kernels), and shrinks the data so the seed is
small and mutations land in the manifest: every constant becomes all-ones
dims (so its bytes are a few), kernel binaries and sections a few bytes.
Writes OUT_DIR/artifact/NAME.qpkg (a valid format-3 file: what the artifact
target reads) and OUT_DIR/artifact-manifest/NAME (manifest, NUL, data: what
the artifact-manifest target reads). With --keep-data (the artifact-run
target, which runs what loads: its seeds must compute), the constants keep
their shapes and bytes and only OUT_DIR/artifact-run/NAME is written.
Standard library only.
"""
import json
import os
import struct
import sys
import zlib

HEADER = struct.Struct('<8sIIQQQQQII')
ALIGN = 64


def pack(manifest: bytes, data: bytes) -> bytes:
    """format::packageFile: header, manifest, 64-aligned data, CRC of all but
    the CRC field."""
    data_off = (64 + len(manifest) + ALIGN - 1) // ALIGN * ALIGN
    size = data_off + len(data)
    body = manifest + b'\0' * (data_off - 64 - len(manifest)) + data
    head = HEADER.pack(b'QCCPKG\r\n', 3, 0, 64, len(manifest), data_off,
                       len(data), size, 0, 0)
    crc = zlib.crc32(head[60:] + body, zlib.crc32(head[:56]))
    return head[:56] + struct.pack('<I', crc) + head[60:] + body


def shrink(path, only, keep_data=False):
    b = open(path, 'rb').read()
    _, _, _, mo, ms, do, ds, _, _, _ = HEADER.unpack(b[:64])
    m = json.loads(b[mo:mo + ms])
    if only:
        m['functions'] = [f for f in m['functions'] if f['name'] == only]
        if 'kernels' in m:
            keep = [i for i, k in enumerate(m['kernels'])
                    if k.get('function') == only]
            index = {old: new for new, old in enumerate(keep)}
            m['kernels'] = [m['kernels'][i] for i in keep]
            m['gpu_functions'] = [f for f in m.get('gpu_functions', [])
                                  if f['name'] == only]
            for f in m['gpu_functions']:
                for n in f['nodes']:
                    k = n.get('attrs', {}).get('kernel', -1)
                    if k >= 0:
                        n['attrs']['kernel'] = index[k]
    data = bytearray()

    def blob(size):
        data.extend(b'\0' * ((-len(data)) % ALIGN))
        off = len(data)
        data.extend(bytes((i * 7 + 1) & 0xff for i in range(size)))
        return off

    sizes = {'f32': 4, 'f16': 2, 'bf16': 2, 'i64': 8, 'i32': 4, 'i8': 1,
             'bool': 1}
    if keep_data:  # the constants keep their offsets (some share bytes)
        data.extend(b[do:do + ds])
    for c in [] if keep_data else m['constants']:
        v = m['values'][c['value']]
        v['shape'] = [1] * len(v['shape'])
        c['size'] = sizes[v['dtype']]
        c['offset'] = blob(c['size'])
    for k in m.get('kernels', []):
        for b_ in k.get('binaries', {}).values():
            b_['size'] = 8
            b_['offset'] = blob(8)
    for s in m.get('sections', {}).values():
        s['size'] = 8
        s['offset'] = blob(8)
    return json.dumps(m, separators=(',', ':')).encode(), bytes(data)


def main():
    keep_data = sys.argv[1] == '--keep-data'
    argv = sys.argv[2:] if keep_data else sys.argv[1:]
    out, args = argv[0], argv[1:]
    dirs = ('artifact-run',) if keep_data else ('artifact', 'artifact-manifest')
    for d in dirs:
        os.makedirs(os.path.join(out, d), exist_ok=True)
    only = None
    for a in args:
        if a.startswith('--only='):
            only = a.split('=', 1)[1]
            continue
        name, path = a.split('=', 1)
        manifest, data = shrink(path, only, keep_data)
        only = None
        if keep_data:
            open(os.path.join(out, 'artifact-run', name), 'wb').write(
                manifest + b'\0' + data)
            continue
        open(os.path.join(out, 'artifact', name + '.qpkg'), 'wb').write(
            pack(manifest, data))
        open(os.path.join(out, 'artifact-manifest', name), 'wb').write(
            manifest + b'\0' + data)


if __name__ == '__main__':
    main()
