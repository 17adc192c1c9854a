"""Macros that give every ferry target the same warning flags."""

FERRY_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
]

def ferry_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = FERRY_COPTS + copts, **kwargs)

def ferry_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = FERRY_COPTS + copts, **kwargs)

def ferry_cc_test(name, copts = [], **kwargs):
    native.cc_test(name = name, copts = FERRY_COPTS + copts, **kwargs)
