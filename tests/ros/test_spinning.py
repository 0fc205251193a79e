"""A node's spin outlives a message rclpy cannot hand over, and ends with its context.

rclpy raises pybind11's ``RuntimeError('Unable to convert call argument ...')`` out of
``spin_once`` when converting a taken message fails (a Ctrl-C landing inside the
conversion, ros2/rclpy#848). A failing take cannot be provoked on demand, so a real
subscription's callback raises that error from inside the same ``spin_once``.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.context import Context
from std_msgs.msg import String

from simops_ros.spinning import STOP_REPORT_AFTER, spin


def _run(errors: dict[str, str]) -> tuple[list[str], threading.Thread, list[BaseException],
                                          Context]:
    """A node on ``/spin_probe`` whose callback raises ``errors[data]``; spun by ``spin``."""
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node('spin_probe', context=context)
    seen: list[str] = []
    raised: list[BaseException] = []

    def on_message(msg: String) -> None:
        seen.append(msg.data)
        if msg.data in errors:
            raise RuntimeError(errors[msg.data])

    node.create_subscription(String, '/spin_probe', on_message, 10)
    publisher = node.create_publisher(String, '/spin_probe', 10)

    def target() -> None:
        try:
            spin(node)
        except BaseException as exc:   # handed to the test
            raised.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    for data in (*errors, 'after'):
        publisher.publish(String(data=data))
        time.sleep(0.2)
    return seen, thread, raised, context


def test_an_unconvertible_message_is_dropped_and_spinning_goes_on() -> None:
    seen, thread, raised, context = _run(
        {'unconvertible': "Unable to convert call argument '0' to Python object (#define "
                          'PYBIND11_DETAILED_ERROR_MESSAGES or compile in debug mode for '
                          'details)'})   # as the policy node printed it in CI
    try:
        assert seen == ['unconvertible', 'after'], seen
        assert thread.is_alive() and not raised, raised
    finally:
        rclpy.shutdown(context=context)
        thread.join(timeout=5)
    assert not thread.is_alive() and not raised, raised   # it ends with its context


def test_any_other_error_still_ends_the_spin() -> None:
    seen, thread, raised, context = _run({'bug': 'a callback bug'})
    try:
        thread.join(timeout=5)
        assert seen[:1] == ['bug'] and len(raised) == 1, (seen, raised)
        with pytest.raises(RuntimeError, match='a callback bug'):
            raise raised[0]
    finally:
        if context.ok():
            rclpy.shutdown(context=context)


def test_a_stop_that_stalls_says_where_and_the_launchers_sigterm_ends_it(
        ros_env: dict[str, str]) -> None:
    """spin_until_signal: 3 s after Ctrl-C a still-running node prints every thread's stack
    (it names the stalled line); a second Ctrl-C changes nothing, and the SIGTERM a launcher
    sends next ends it."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from ros_helpers import wait_until

    script = Path(__file__).parents[1] / 'procs' / 'stalled_stop.py'
    proc = subprocess.Popen([sys.executable, str(script)], env=ros_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == 'spinning'
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline().strip() == 'stopping'
        proc.send_signal(signal.SIGINT)   # a second Ctrl-C: the stop goes on
        time.sleep(STOP_REPORT_AFTER + 1.0)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert wait_until(lambda: proc.poll() is not None, 10)
        assert proc.returncode == -signal.SIGTERM
        stacks = proc.stderr.read()
        assert 'stalled_stop.py", line 21 in main' in stacks, stacks
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_run_node_freezes_start_up_objects_before_it_spins() -> None:
    """A full collection while running walks only what the node allocated since start-up
    (imports, model, node): ``gc.freeze`` ran between building the node and spinning it."""
    import gc

    from rclpy.signals import SignalHandlerOptions

    from simops_ros.scaffold import run_node

    frozen: list[int] = []
    gc.unfreeze()
    interrupt = signal.getsignal(signal.SIGINT)
    try:
        code = run_node('freeze_probe', 'a node that spins once',
                        lambda: rclpy.create_node('freeze_probe'), args=['freeze_probe'],
                        spin=lambda node: frozen.append(gc.get_freeze_count()),
                        signals=SignalHandlerOptions.NO)
    finally:
        gc.unfreeze()
        # run_node ignores SIGINT as it ends (a node's process is ending): not pytest's
        signal.signal(signal.SIGINT, interrupt)
    assert code == 0
    assert frozen and frozen[0] > 10_000, frozen   # rclpy alone brings tens of thousands
    assert gc.get_freeze_count() == 0   # handed back once the node is destroyed


def test_a_ctrl_c_that_comes_as_a_node_exits_leaves_its_exit_code(
        ros_env: dict[str, str]) -> None:
    """A launcher's SIGINT that reaches a one-shot node (``arm_setup``) after rclpy's shutdown
    changes nothing: it exits with its own code. It used to end killed by SIGINT (CI: the
    stand-in's real_robot graph stopped right after ``arm_setup`` had set the arm)."""
    import subprocess
    import sys

    script = Path(__file__).parents[1] / 'procs' / 'late_ctrl_c.py'
    done = subprocess.run([sys.executable, str(script)], env=ros_env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert 'Traceback' not in done.stderr, done.stderr


def test_a_node_that_ends_on_ctrl_c_removes_its_shared_memory_segment(
        ros_env: dict[str, str], tmp_path: Path) -> None:
    """The simulator's Fast DDS participant is destroyed at exit: the segment it mapped from
    /dev/shm (32 MB with config/dds/) is gone once it has ended. Its rclpy context stayed
    frozen and was never finalised before, so every run left its segment behind (3 GB after
    two test runs)."""
    from ros_helpers import NodeProcess, wait_until

    segment = re.compile(r'/dev/shm/fast(dds|rtps)_[0-9a-f]{16}$')   # Fast DDS 3 | 2; not ports
    with NodeProcess.ros2_run('simops_sim', 'sim', log_path=tmp_path / 'sim.log',
                              env=ros_env) as node:
        def mapped() -> set[str]:
            maps = Path(f'/proc/{node.proc.pid}/maps').read_text()
            return {path for line in maps.splitlines()
                    if segment.match(path := line.split(maxsplit=5)[-1])}

        assert wait_until(lambda: 'joint_states at' in node.output, 30), node.output
        time.sleep(1.0)   # built, frozen and spinning
        segments = mapped()
        assert segments, node.output
        assert node.stop() == 0, node.output
    assert [path for path in segments if Path(path).exists()] == [], node.output
