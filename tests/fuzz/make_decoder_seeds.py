#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/decoder's seeds: readable payloads and decode
configs laid out the way decoder_fuzzer.cc reads its input
(FuzzedDataProvider: strings from the front, numbers from the back).
Run from tests/fuzz/: python3 make_decoder_seeds.py"""
import struct

KINDS = {"record_key": 0, "header": 1, "json": 2, "topic": 3, "const": 4}


def string(text):
    # ConsumeRandomLengthString ends a string at a backslash followed by
    # another character; a doubled backslash is one backslash.
    return text.replace(b"\\", b"\\\\") + b"\\x"


def seed(payload, key, type_, record_key=None, headers=()):
    front = payload + string(key[1]) + string(type_[1])
    back = [len(payload) >> 8, len(payload) & 0xFF, KINDS[key[0]], KINDS[type_[0]]]
    back += [1]                          # the configured topic
    back += [0] * 4 + [0] * 7 + [42]    # partition 0, offset 42
    if record_key is None:
        back += [0]
    else:
        back += [1]
        front += string(record_key)
    back += [len(headers)]
    for name, value in headers:
        front += string(name) + string(value)
    back += [0] * 8                     # timestamp
    return front + bytes(reversed(back))


SEEDS = {
    "json_key_header_type": seed(b'{"user":{"id":"u1"},"n":[1,2,3]}', ("json", b"/user/id"),
                                 ("header", b"event-type"), b"k",
                                 [(b"event-type", b"order.created"), (b"trace", b"\x00\xff")]),
    "json_number_type": seed(b'{"type":12.5e3,"ok":true}', ("record_key", b""),
                             ("json", b"/type"), b"key"),
    "json_array_index": seed(b'[{"a":"x"},{"a":"y"}]', ("json", b"/1/a"), ("topic", b"")),
    "const_type": seed(b"not json at all", ("const", b"c"), ("const", b"order")),
    "invalid_utf8_type_header": seed(b"{}", ("record_key", b""), ("header", b"t"), None,
                                     [(b"t", b"\xc3\x28")]),
    "invalid_utf8_json_string": seed(b'{"t":"\xed\xa0\x80"}', ("record_key", b""),
                                     ("json", b"/t")),
    "deep_json": seed(b"[" * 300 + b"]" * 300, ("json", b"/0/0/0"), ("topic", b"")),
    "escaped_pointer": seed(b'{"a/b":{"m~n":"v"}}', ("json", b"/a~1b/m~0n"), ("topic", b"")),
    "huge_index": seed(b"[1]", ("json", b"/99999999999999999999999"), ("topic", b"")),
    # issue 20 item 2: a header name that is not UTF-8 (Header.raw_key).
    "invalid_utf8_header_name": seed(b"", ("record_key", b""), ("topic", b""), b"k",
                                     [(b"\xc3\x28", b"v")]),
    "repeated_header": seed(b"", ("header", b"k"), ("topic", b""), None,
                            [(b"k", b"first"), (b"k", b"last")]),
}
# Reproducers of defects whose fix is not merged yet go to crashes/decoder/.
CRASHES = {}

if __name__ == "__main__":
    for name, data in SEEDS.items():
        with open("corpus/decoder/" + name, "wb") as f:
            f.write(data)
    for name, data in CRASHES.items():
        with open("crashes/decoder/" + name, "wb") as f:
            f.write(data)
