"""The one path by which text from the input (the robot's, links' and joints' names) reaches
generated code. Generated code is compiled and loaded into the user's process, so a name must
never be able to end a comment, a string literal or a line, or to form a trigraph or a Tcl
substitution. Everything from a URDF goes through one of these three functions:

* :func:`comment` — text inside a ``//``, ``/* */`` (C, C++, CUDA) or ``#`` (Tcl) comment;
* :func:`c_string` — the body of a C string literal (between the double quotes);
* identifiers are never built from names by hand: :func:`rbdgen.codegen.sources.c_identifier`.

Python sources of generated packages print names as JSON string literals (valid Python) and
docstrings through :func:`py_docstring`.
"""
from __future__ import annotations

import string

#: characters a comment keeps as they are: letters, digits, space and punctuation that cannot
#: start or end a comment (no '/', '*'), splice a line ('\\'), form a trigraph ('?'), or mean
#: something to Tcl ('{', '}', '[', ']', '$', '"', ';' and '\\')
_COMMENT_SAFE = frozenset(string.ascii_letters + string.digits + " _-.,:+=()<>@!%&|~^'#")


def comment(text) -> str:
    """``text`` safe inside any comment of C, C++, CUDA or Tcl: other characters are written
    ``<U+XXXX>`` (so a newline, ``*/``, ``??/`` or non-ASCII cannot change the code around it)."""
    return "".join(c if c in _COMMENT_SAFE else f"<U+{ord(c):04X}>" for c in str(text))


_STRING_SAFE = frozenset(string.ascii_letters + string.digits + " _-.,:;+=()<>[]{}@!#$%&|~^'*/")


def c_string(text) -> str:
    """``text`` as the body of a C/C++ string literal: characters other than plain printable
    ASCII (quotes, backslashes, '?', control characters, non-ASCII as UTF-8 bytes) become
    three-digit octal escapes, which no following character can extend."""
    out = []
    for c in str(text):
        if c in _STRING_SAFE:
            out.append(c)
        else:
            out.extend(f"\\{b:03o}" for b in c.encode("utf-8", "surrogatepass"))
    return "".join(out)


def py_docstring(text) -> str:
    """``text`` safe inside a triple-quoted Python docstring: backslashes, quotes and control
    characters escaped (a NUL byte or a lone surrogate would not even parse)."""
    out = []
    for c in str(text):
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c.isprintable() and not (0xD800 <= ord(c) <= 0xDFFF):
            out.append(c)
        else:
            out.append(f"\\U{ord(c):08x}")
    return "".join(out)
