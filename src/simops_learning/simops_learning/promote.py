"""``simops-promote``: seal a gate PASS into the policy's promotion record.

    simops-promote --policy P.pt --report DIR/validation.json [--card P.yaml]
        [--sim-params FIT.yaml] [--pipeline pipelines/X.yaml] [--training CONFIG]

The report (``simops-validate``'s JSON) must be a PASS of exactly this policy file (its
sha256) against exactly this calibration (``--sim-params``; none: the nominal model). The
record (:mod:`simops_core.promotion`) binds the policy, its card, the calibration and the
bags it was fitted from (its provenance), the report and, when given, the pipeline file and
the training config. ``simops-validate --promote`` gates and promotes in one command.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    CommandLineParser,
    UsageError,
    exit_codes,
)
from simops_core.policy_card import file_sha256
from simops_core.promotion import (
    PromotionError,
    PromotionRecord,
    append_record,
    file_entry,
    gate_entry,
    record_path,
)
from simops_core.sim_params import SimParamsError, load_sim_params

EXIT_NOT_PASS = 4
EXIT_CODES = {EXIT_OK: 'promoted: the record was appended beside the policy',
              EXIT_FAILED: 'it failed (the line says why; nothing written)',
              EXIT_NOT_PASS: 'the report is not a PASS (nothing written)',
              EXIT_CONFIG: 'bad command line; a file cannot be read; the report is not of '
                           'this policy or calibration; the record file was tampered with'}


class NotPassError(Exception):
    """The report's verdict is not PASS."""


def calibration_bags(sim_params: Path | None) -> list[dict[str, str]]:
    """The bags (``{path, sha256}``) a fitted SimParams' provenance names; [] otherwise."""
    if sim_params is None:
        return []
    bags = load_sim_params(sim_params).provenance.get('bags') or []
    return [{'path': str(b['path']), 'sha256': str(b['sha256'])} for b in bags
            if isinstance(b, Mapping) and 'path' in b and 'sha256' in b]


def promote(report_path: Path, policy: Path, card: Path, sim_params: Path | None,
            extra: Mapping[str, Any] | None = None) -> PromotionRecord:
    """Append the record of the PASS ``report_path`` for ``policy`` beside it; return it.

    Raises :class:`NotPassError` for another verdict, :class:`UsageError` for a report of
    another policy file or calibration, :class:`PromotionError` for a tampered record file.
    """
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f'cannot read the gate report {report_path}: {exc}') from None
    if not isinstance(report, dict) or 'verdict' not in report or 'sha256' not in report:
        raise UsageError(f'{report_path} is not a simops-validate report')
    sha = file_sha256(policy)
    if report['sha256'] != sha:
        raise UsageError(f'{report_path} gated another file than {policy} (sha256 '
                         f'{report["sha256"][:12]}, the file is {sha[:12]}); gate this one')
    gated = report.get('sim_params')
    if (gated is None) != (sim_params is None) or (
            gated is not None and Path(gated).resolve() != sim_params.resolve()):
        raise UsageError(f'{report_path} was gated against {gated or "the nominal model"}, '
                         f'not {sim_params or "the nominal model"}')
    if report['verdict'] != 'pass':
        raise NotPassError(f'{report_path}: the verdict is {report["verdict"].upper()}, not '
                           'PASS; nothing promoted')
    entry = gate_entry(report, report_path, policy, card, sim_params,
                       calibration_bags(sim_params), extra)
    return append_record(record_path(policy), entry)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see ``simops-promote --help``."""
    parser = CommandLineParser('simops-promote', __doc__.split('\n\n')[0].split(': ', 1)[1],
                               exit_codes(EXIT_CODES))
    parser.add_argument('--policy', required=True, help='the policy file that was gated')
    parser.add_argument('--report', required=True, help="simops-validate's validation.json")
    parser.add_argument('--card', help='policy card (default: policy path with .yaml)')
    parser.add_argument('--sim-params', help='the calibration it was gated against '
                                             '(default: the nominal model)')
    parser.add_argument('--pipeline', help='the pipeline file that made it, bound by sha256')
    parser.add_argument('--training', help='the training config, bound by sha256')
    args = parser.parse_args(argv)
    try:
        policy = Path(args.policy)
        card = Path(args.card) if args.card else policy.with_suffix('.yaml')
        for path in (policy, card, Path(args.report)):
            if not path.is_file():
                raise UsageError(f'{path} does not exist')
        sim_params = Path(args.sim_params) if args.sim_params else None
        extra = {key: file_entry(getattr(args, key)) for key in ('pipeline', 'training')
                 if getattr(args, key)}
        record = promote(Path(args.report), policy, card, sim_params, extra)
    except NotPassError as exc:
        print(f'simops-promote: {exc}', file=sys.stderr)
        return EXIT_NOT_PASS
    except (UsageError, PromotionError, SimParamsError, OSError) as exc:
        print(f'simops-promote: error: {exc}', file=sys.stderr)
        return EXIT_CONFIG
    except Exception as exc:  # one line, a distinct code
        print(f'simops-promote: error: {type(exc).__name__}: {exc}', file=sys.stderr)
        return EXIT_FAILED
    print(f'promoted {policy.name} (sha256 {record.sha("policy")[:12]}) against '
          f'{sim_params or "the nominal model"}: record {record.entry["sha256"][:12]} in '
          f'{record_path(policy)}')
    return EXIT_OK


if __name__ == '__main__':
    sys.exit(main())
