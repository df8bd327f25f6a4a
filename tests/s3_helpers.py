"""Helpers for the tests on a local S3 server: credentials, and comparing what a run wrote into
a bucket with what it wrote into a local folder."""

from __future__ import annotations

import hashlib
from pathlib import Path

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def s3(endpoint: str) -> object:
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)


def bucket_digests(endpoint: str, uri: str) -> dict[str, str]:
    """The sha256 of every object under `uri`, by name below it."""
    fs = s3(endpoint)
    root = uri.removeprefix("s3://").rstrip("/")
    return {
        path[len(root) + 1 :]: hashlib.sha256(fs.cat_file(path)).hexdigest()  # type: ignore[attr-defined]
        for path in sorted(fs.find(root))  # type: ignore[attr-defined]
    }


def folder_digests(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


SAME_BYTES = ("data/", "rejects/", "stats.parquet", "stats.csv")
"""What a run writes byte for byte the same every time (summary.json and README.md hold its
time)."""


def comparable(digests: dict[str, str]) -> dict[str, str]:
    return {name: digest for name, digest in digests.items() if name.startswith(SAME_BYTES)}
