"""What the API server refuses in an object's labels and annotations, so that `try` and `test`
refuse it too (a manifest error, exit 2) instead of playing a pod no cluster would admit.

Owns the rules of k8s.io/apimachinery's ValidateLabels and ValidateAnnotations
(pkg/api/validation/objectmeta.go, util/validation/validation.go): a key is a qualified name
— an optional DNS-subdomain prefix (at most 253 characters) and `/`, then a name of at most 63
characters, alphanumeric at both ends with `-`, `_`, `.` between; a label value is empty or
such a name; annotations together (keys and values) are at most 256 KiB
(TotalAnnotationSizeLimitB). Must not: check anything else of a manifest (bridge.kube.pod_manifest).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from bridge.kube.manifest_error import ManifestError

MAX_ANNOTATIONS_BYTES = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB
MAX_NAME_CHARS = 63
MAX_PREFIX_CHARS = 253
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > MAX_PREFIX_CHARS
                  or not _DNS_SUBDOMAIN.match(prefix)):
        return (f"key {key!r}: the prefix must be a DNS subdomain (lower case, at most "
                f"{MAX_PREFIX_CHARS} characters)")
    if not name or len(name) > MAX_NAME_CHARS or not _NAME.match(name):
        return (f"key {key!r}: the name must be at most {MAX_NAME_CHARS} characters, "
                "alphanumeric at both ends, with '-', '_' or '.' between")
    return None


def check_labels(labels: Mapping[str, str], where: str, field: str) -> None:
    for key, value in labels.items():
        problem = _key_problem(key)
        if problem is None and value and (len(value) > MAX_NAME_CHARS or not _NAME.match(value)):
            problem = (f"value {value[:80]!r}: must be empty or at most {MAX_NAME_CHARS} "
                       "characters, alphanumeric at both ends, with '-', '_' or '.' between")
        if problem is not None:
            raise ManifestError(where, f"{field}.{key}", problem)


def check_annotations(annotations: Mapping[str, str], where: str, field: str) -> None:
    total = 0
    for key, value in annotations.items():
        problem = _key_problem(key)
        if problem is not None:
            raise ManifestError(where, f"{field}.{key}", problem)
        total += len(key.encode()) + len(value.encode())
    if total > MAX_ANNOTATIONS_BYTES:
        raise ManifestError(where, field, f"{total} bytes in all; the API server refuses more "
                            f"than {MAX_ANNOTATIONS_BYTES} (256 KiB)")
