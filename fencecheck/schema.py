"""The JSON Schema of a results file (``results/<release>.json``), which ``fencecheck.record.load``
validates each file against (``record.problems`` adds what a schema cannot state); docs/matrix.md
says what each field means. ``python -m fencecheck.schema`` prints it.
"""
from __future__ import annotations

import json

_TEXT = {"type": "string"}
#: fences.observe's values (name -> value) and their labels (name -> words)
_NAMED = {"type": "object", "propertyNames": {"pattern": "^[A-Za-z0-9_.\\-]+$"}, "additionalProperties": _TEXT}

FENCE = {
    "type": "object",
    "required": ["id", "chapter", "cell", "code", "outcome", "reason", "details", "proves", "observed", "labels"],
    "additionalProperties": False,
    "properties": {
        # lower-case ASCII words joined by "-" (the lint's rule for a fence-id)
        "id": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
        "chapter": {"type": "string", "pattern": "\\.md$"},
        "cell": {"type": "integer", "minimum": 0},           # its index among the chapter's code cells
        "code": {"type": "string", "minLength": 1},          # record.code_hash of its source
        "outcome": {"enum": ["passed", "failed", "skipped"]},
        "reason": _TEXT, "details": _TEXT, "proves": _TEXT,
        "observed": _NAMED, "labels": _NAMED,
        # the messages its raises/warns blocks caught, in full (fences.parse_raised)
        "raised": {"type": "array", "items": {
            "type": "object", "required": ["class", "message"], "additionalProperties": False,
            "properties": {"class": _TEXT, "message": _TEXT}}},
    },
}

ERROR = {
    "type": "object",
    "required": ["chapter", "item", "reason"],
    "additionalProperties": False,
    "properties": {
        "chapter": _TEXT, "item": _TEXT, "cell": {"type": ["integer", "null"]},
        "reason": _TEXT, "details": _TEXT,
    },
}

RESULTS = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Tensor Fences results file (one run of the book on one torch)",
    "type": "object",
    "required": ["release", "torch", "build", "date", "exitstatus", "fences", "errors"],
    "additionalProperties": False,
    "properties": {
        "release": {"type": "string", "minLength": 1},
        "torch": {"type": ["string", "null"]},        # null: the install failed
        "torch_git": {"type": ["string", "null"]},
        "build": {"type": "string"},                  # "CPU-only", "CUDA 12.8", "install failed"
        "cuda": {"type": ["string", "null"]},
        "gpu": {"type": ["string", "null"]},          # the device name; null: no GPU ran
        "numpy": _TEXT, "python": _TEXT, "platform": _TEXT,
        "commit": {"type": ["string", "null"]},       # the last commit that changed record.BOOK_PATHS
        "dirty": {"type": ["boolean", "null"]},
        "date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
        "exitstatus": {"type": "integer"},
        "error": _TEXT,                               # why the install failed
        "fences": {"type": "array", "items": FENCE},
        "errors": {"type": "array", "items": ERROR},
        "chapters": {"type": "object", "propertyNames": {"pattern": "\\.md$"},   # -> record.chapter_digest
                     "additionalProperties": _TEXT},
    },
}

if __name__ == "__main__":
    print(json.dumps(RESULTS, indent=1))
