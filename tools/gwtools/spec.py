"""The one method grammar of gradwire's tools: the library's spec string.

A spec names a codec and optional settings, exactly as the library parses
it (lib/codec/compression_spec.h, CompressionSpec::Parse):

    none   fp16   bf16   topk:ratio=0.01   approx_topk:ratio=0.001
    randomk:ratio=0.01,seed=7   qsgd:bits=4,bucket=512   sign:bucket=1024
    topk:ratio=0.01,values=fp16,indices=raw,ef=off

parse_spec mirrors that parser (same methods, keys, defaults, ranges and
canonical string; tests/tools/spec_crosscheck_test.py compares the two on
a corpus through the Python binding), so tools and the planner need no
extension module to read a spec. Whether an exchange is hierarchical
(HiTopKComm) is not part of the spec: tools take it as a separate switch.

A list of specs is separated by ';' (specs contain commas):

    "none;topk:ratio=0.01;approx_topk:ratio=0.001"
"""

import dataclasses
import re

METHODS = ("none", "fp16", "bf16", "topk", "approx_topk", "randomk", "qsgd", "sign")
SPARSE = ("topk", "approx_topk", "randomk")
KEYS = ("ratio", "bits", "bucket", "ef", "seed", "values", "indices")
LIST_SEPARATOR = ";"
# The settings each method uses (lib/codec/compression_spec.cc, SettingsOf):
# others are refused unless the string is canonical (names every setting).
SETTINGS_OF = {
    "none": (), "fp16": ("ef",), "bf16": ("ef",),
    "topk": ("ratio", "ef", "values", "indices"),
    "approx_topk": ("ratio", "ef", "values", "indices"),
    "randomk": ("ratio", "ef", "seed", "values"),
    "qsgd": ("bits", "bucket", "seed", "ef"),
    "sign": ("bucket", "ef"),
}
HIERARCHICAL_CHOICES = ("off", "on", "both")

# re.ASCII: \d and \s as absl's parsers read them. Without it "qsgd:bits=٣"
# (an Arabic-Indic three) passed here and was refused by the library.
_FLOAT = re.compile(r"\s*\+?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\s*",
                    re.IGNORECASE | re.ASCII)
_HEX_FLOAT = re.compile(r"\s*\+?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
                        r"(?:[pP][+-]?\d+)?\s*", re.ASCII)
_INT = re.compile(r"\s*[+-]?\d+\s*", re.ASCII)
_UINT = re.compile(r"\s*\+?\d+\s*", re.ASCII)


# What absl's StripAsciiWhitespace removes (str.strip() also takes U+00A0,
# U+2003, ...).
_ASCII_SPACE = " \t\n\v\f\r"


class SpecError(ValueError):
    """A spec string the library would refuse; the message names the setting."""


@dataclasses.dataclass(frozen=True)
class Spec:
    method: str = "none"
    ratio: float = 0.01      # density k/n for sparse methods, in (0, 1]
    bits: int = 4            # qsgd: 1..8
    bucket: int = 512        # qsgd, sign: elements per fp32 scale
    ef: str = "default"      # error feedback: on, off, default (on for lossy methods)
    seed: int = 0
    values: str = "fp32"     # sparse value type: fp32, fp16, bf16
    indices: str = "varint"  # top-k index encoding: varint, raw

    @property
    def sparse(self):
        return self.method in SPARSE

    def canonical(self):
        """CompressionSpec::ToString(): every setting, ef only when set."""
        out = (f"{self.method}:ratio={_exact_double(self.ratio)},bits={self.bits},"
               f"bucket={self.bucket},seed={self.seed},values={self.values},"
               f"indices={self.indices}")
        return out + ("" if self.ef == "default" else f",ef={self.ef}")

    def uses_error_feedback(self):
        return self.ef == "on" or (self.ef == "default" and self.method != "none")


def _exact_double(v):
    """The shortest %g that reads back as exactly v (the C++ ExactDouble)."""
    for precision in range(1, 18):
        text = "%.*g" % (precision, v)
        if float(text) == v:
            return text
    return text


def _bad(key, rule, got):
    return SpecError(f"{key} must be {rule}, got {got!r}")


def _set(fields, key, value):
    if key == "ratio":
        number = value.strip(_ASCII_SPACE).lstrip("+")
        if _HEX_FLOAT.fullmatch(value):  # absl::SimpleAtod reads hex floats too
            fields[key] = float.fromhex(number)
        elif _FLOAT.fullmatch(value):
            fields[key] = float(number)
        else:
            raise _bad(key, "a number in (0, 1]", value)
    elif key == "bits":
        if not _INT.fullmatch(value) or not -2**31 <= int(value) < 2**31:
            raise _bad(key, "an integer in 1..8", value)
        fields[key] = int(value)
    elif key == "bucket":
        if not _UINT.fullmatch(value) or int(value) >= 2**32:
            raise _bad(key, "an integer in 1..4294967295", value)
        fields[key] = int(value)
    elif key == "seed":
        if not _UINT.fullmatch(value) or int(value) >= 2**64:
            raise _bad(key, "an unsigned 64-bit integer", value)
        fields[key] = int(value)
    else:
        allowed = {"ef": ("on", "off", "default"), "values": ("fp32", "fp16", "bf16"),
                   "indices": ("raw", "varint")}[key]
        if value not in allowed:
            raise _bad(key, "one of " + ", ".join(allowed), value)
        fields[key] = value


def _validate(s):
    if not (0.0 < s.ratio <= 1.0):  # also refuses NaN
        raise SpecError(f"ratio must be in (0, 1], got {_exact_double(s.ratio)}")
    if not 1 <= s.bits <= 8:
        raise SpecError(f"bits must be in 1..8, got {s.bits}")
    if s.bucket < 1:
        raise SpecError(f"bucket must be in 1..4294967295, got {s.bucket}")


def _old_spelling_hint(text):
    """A pointer to the spec grammar for the methods' spelling before it."""
    old = re.fullmatch(r"\s*(\w+)=([^:,;]*?)(\+hier)?\s*", text)
    if old and old.group(1) in METHODS:
        key = "bits" if old.group(1) == "qsgd" else "ratio"
        return (f" (methods are spec strings now: {old.group(1)}:{key}={old.group(2)}"
                f"{'; hierarchical is a separate switch' if old.group(3) else ''})")
    if text.strip(_ASCII_SPACE).endswith("+hier"):
        return " ('+hier' is gone: hierarchical is a separate switch)"
    if "," in text.partition(":")[0]:
        return f" (separate a list of specs with {LIST_SEPARATOR!r}: specs contain commas)"
    return ""


def parse_spec(text):
    """Parses a spec string as CompressionSpec::Parse does; SpecError if it would refuse."""
    if not isinstance(text, str):
        raise SpecError(f"a compression spec must be a string, got {text!r}")
    name, colon, rest = text.partition(":")
    name = name.strip(_ASCII_SPACE)
    if name not in METHODS:
        raise SpecError(f"compression method must be one of {', '.join(METHODS)}, got "
                        f"{name!r}" + _old_spelling_hint(text))
    fields = {"method": name}
    seen = set()
    if colon:
        for item in rest.split(","):
            item = item.strip(_ASCII_SPACE)
            key, eq, value = item.partition("=")
            key, value = key.strip(_ASCII_SPACE), value.strip(_ASCII_SPACE)
            if key not in KEYS:
                raise SpecError(f"unknown setting {key!r} in compression spec {text!r} "
                                f"(known: {', '.join(KEYS)})")
            if not eq or not value:
                raise SpecError(f"setting {key} needs a value: {key}=...")
            if key in seen:
                raise SpecError(f"setting {key} given twice in {text!r}")
            seen.add(key)
            _set(fields, key, value)
    spec = Spec(**fields)
    _validate(spec)
    if colon and spec.canonical() != text.strip(_ASCII_SPACE):
        used = SETTINGS_OF[name]
        for key in seen:
            if key not in used:
                takes = (f"{name} takes: {', '.join(used)}" if used
                         else f"{name} takes no settings")
                raise SpecError(f"setting {key} does not apply to method {name} in spec "
                                f"{text.strip(_ASCII_SPACE)!r} ({takes})")
    return spec


def split_list(text):
    """'none;topk:ratio=0.01' -> ['none', 'topk:ratio=0.01'] (empty items dropped)."""
    return [t.strip(_ASCII_SPACE) for t in (text or "").split(LIST_SEPARATOR) if t.strip(_ASCII_SPACE)]


def hierarchical_variants(spec, hierarchical):
    """The hierarchical settings to run `spec` with for switch value off, on or both.
    Dense ('none') is always flat: hierarchical mode only changes compressed buckets."""
    if hierarchical not in HIERARCHICAL_CHOICES:
        raise SpecError(f"hierarchical must be one of {', '.join(HIERARCHICAL_CHOICES)}, "
                        f"got {hierarchical!r}")
    if spec.method == "none" or hierarchical == "off":
        return [False]
    return [True] if hierarchical == "on" else [False, True]


def method(text, hierarchical=False):
    """One benchmark method: a spec string plus the hierarchical switch, as the
    dict the benchmarks and the planner use."""
    spec = parse_spec(text)
    if hierarchical and spec.method == "none":
        raise SpecError("'none' (dense allreduce) is never hierarchical")
    return {
        "name": text.strip(_ASCII_SPACE) + (" hier" if hierarchical else ""),
        "spec_text": text.strip(_ASCII_SPACE),
        "spec": spec.canonical(),
        "codec": spec.method,
        "density": spec.ratio if spec.sparse else None,
        "bits": spec.bits if spec.method == "qsgd" else None,
        "hierarchical": bool(hierarchical),
    }


def method_list(text, hierarchical="off"):
    """Methods from a ';'-separated spec list and the hierarchical switch (off, on,
    both), in order, without duplicates."""
    out, names = [], set()
    for item in split_list(text):
        spec = parse_spec(item)
        for hier in hierarchical_variants(spec, hierarchical):
            m = method(item, hier)
            if m["name"] not in names:
                names.add(m["name"])
                out.append(m)
    return out


__all__ = ["Spec", "SpecError", "parse_spec", "split_list", "method", "method_list",
           "hierarchical_variants", "METHODS", "LIST_SEPARATOR", "HIERARCHICAL_CHOICES"]
