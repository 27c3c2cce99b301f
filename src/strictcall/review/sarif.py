"""Lint findings as SARIF 2.1.0, the format code-scanning tools read."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from strictcall.review.lint import Finding
from strictcall.review.rules import RULES

SARIF_VERSION: Final = "2.1.0"
SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"


def sarif_log(findings: Sequence[Finding], version: str) -> dict[str, Any]:
    """One SARIF log with one run: the rules, then a result per finding."""
    ids = list(RULES)
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "strictcall",
                        "version": version,
                        "rules": [
                            {
                                "id": rule.id,
                                "name": rule.name,
                                "shortDescription": {"text": rule.summary},
                                "fullDescription": {"text": rule.question},
                                "help": {"text": rule.question},
                                "defaultConfiguration": {"level": "warning"},
                            }
                            for rule in RULES.values()
                        ],
                    }
                },
                "originalUriBaseIds": {"SRCROOT": {"uri": Path.cwd().resolve().as_uri() + "/"}},
                "results": [_result(finding, ids.index(finding.rule.id)) for finding in findings],
            }
        ],
    }


def _result(finding: Finding, index: int) -> dict[str, Any]:
    return {
        "ruleId": finding.rule.id,
        "ruleIndex": index,
        "level": "warning" if finding.confidence != "guess" else "note",
        "message": {"text": finding.detail()},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": _artifact(finding.path),
                    "region": {
                        "startLine": finding.line,
                        "startColumn": finding.col,
                        "endLine": finding.end_line,
                        "endColumn": finding.end_col,
                    },
                }
            }
        ],
        "properties": {
            "question": finding.question,
            "input": finding.input,
            "falsy": list(finding.falsy),
            "why": finding.why,
            "evidence": finding.evidence,
            "counterexample": finding.counterexample,
            "remedy": finding.remedy,
            "confidence": finding.confidence,
        },
    }


def _artifact(path: str) -> dict[str, str]:
    resolved = Path(path).resolve()
    try:
        relative = resolved.relative_to(Path.cwd().resolve())
    except ValueError:
        return {"uri": resolved.as_uri()}
    return {"uri": Path(os.path.normpath(relative)).as_posix(), "uriBaseId": "SRCROOT"}
