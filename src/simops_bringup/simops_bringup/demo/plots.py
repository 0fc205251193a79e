"""Plots of ``simops-demo``: parameter recovery and the policy episode on the stand-in.

The fit report (``fit --report``) and the validation heatmaps (``simops-validate``) come
from the tools themselves; these two figures show what only the demo knows: the hidden
truth, and the recorded policy episode read back with :mod:`simops_core.bag_reader`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simops_bringup.demo.summary import MAX_ERROR, Recovered
from simops_core.bag_reader import RawBag, read_bag


def _pyplot():  # noqa: ANN202 - matplotlib.pyplot module
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot

    return pyplot


def plot_recovery(rows: Sequence[Recovered], path: Path) -> Path:
    """Nominal and fitted values as ratios to the truth, one bar pair per parameter."""
    plt = _pyplot()
    x = np.arange(len(rows))
    figure, ax = plt.subplots(figsize=(max(8.0, 0.22 * len(rows) + 2), 4.5))
    ax.bar(x - 0.2, [r.nominal / r.truth for r in rows], 0.4, label='nominal (start)',
           color='0.7')
    ax.bar(x + 0.2, [r.fitted / r.truth for r in rows], 0.4, label='fitted', color='C0')
    ax.axhspan(1 - MAX_ERROR, 1 + MAX_ERROR, color='C2', alpha=0.15,
               label=f'within {MAX_ERROR:.0%} of the truth')
    ax.axhline(1.0, color='C2', lw=1)
    ax.set_xticks(x, [r.name.replace('fr3_joint', 'j') for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel('value / hidden truth')
    ax.set_title('Parameter recovery: fit on the stand-in\'s recordings vs its hidden physics')
    ax.legend(fontsize=8, loc='upper right')
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def plot_policy_episode(bag: Path, ee_topic: str, goal_topic: str, radius: float,
                        path: Path) -> Path:
    """The flange's distance to the current goal over the recorded policy episode.

    Both topics are placed on the recorder's receive clock: the stand-in stamps poses with
    its own simulation time, the goals carry no stamp.
    """
    raw = read_bag(bag, [ee_topic, goal_topic])
    raw.require(ee_topic, goal_topic)
    ee_t, ee = _positions(raw, ee_topic)
    goal_t, goals = _positions(raw, goal_topic)
    index = np.searchsorted(goal_t, ee_t, side='right') - 1
    keep = index >= 0
    distance = np.linalg.norm(ee[keep] - goals[index[keep]], axis=1)
    t0 = ee_t[keep][0]
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(ee_t[keep] - t0, 1e3 * distance, lw=1.2, label='flange to goal')
    for t in goal_t[goal_t >= t0]:
        ax.axvline(t - t0, color='0.6', lw=0.8, ls='--')
    ax.axhline(1e3 * radius, color='C2', lw=1, label=f'success radius {radius * 1e3:.0f} mm')
    ax.set_xlabel('time in the episode (s); dashed: a new goal')
    ax.set_ylabel('distance (mm)')
    ax.set_yscale('log')
    ax.set_title(f'Policy episode on the stand-in ({bag.name})')
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _positions(raw: RawBag, topic: str) -> tuple[np.ndarray, np.ndarray]:
    """Receive times (s) and positions (N, 3) of a PoseStamped topic."""
    times = 1e-9 * np.asarray(raw.topics[topic].log_time, dtype=float)
    points = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z]
                       for m in raw.decode(topic)]).reshape(-1, 3)
    order = np.argsort(times, kind='stable')
    return times[order], points[order]
