"""A node's own thread that dies stops the node (exit 1), once, and never while it stops."""

from __future__ import annotations

import threading

import pytest
import rclpy
from rclpy.context import Context
from rclpy.node import Node

from simops_core.command_line import EXIT_FAILED, EXIT_OK
from simops_ros.thread_failure import ThreadFailure


@pytest.fixture
def node() -> Node:
    context = Context()
    rclpy.init(context=context)
    made = rclpy.create_node('thread_failure_probe', context=context)
    yield made
    made.destroy_node()
    rclpy.try_shutdown(context=context)


def test_a_thread_that_raises_shuts_the_node_down_and_names_the_line(
        node: Node, capfd: pytest.CaptureFixture[str]) -> None:
    failed = ThreadFailure(node)

    def control() -> None:
        raise ValueError('diagnostics could not be published')

    thread = failed.start(control, 'control')
    thread.join(timeout=5)
    assert not thread.is_alive() and thread.name == 'control' and thread.daemon
    assert isinstance(failed.error, ValueError)
    assert not node.context.ok()        # the spin ends, run_node calls stop(): the node ends
    assert failed.exit_code == EXIT_FAILED
    err = capfd.readouterr().err
    assert "the control thread failed: ValueError('diagnostics could not be published') at " \
           in err and 'test_thread_failure.py:' in err and 'the node stops (exit 1)' in err, err
    assert 'Traceback' not in err


def test_only_the_first_failure_counts(node: Node) -> None:
    failed = ThreadFailure(node)
    first, second = RuntimeError('physics'), RuntimeError('camera')
    failed(first, 'physics')
    failed(second, 'camera')
    assert failed.error is first and failed.exit_code == EXIT_FAILED


def test_an_error_while_the_node_stops_or_after_a_shutdown_is_no_failure(node: Node) -> None:
    running = threading.Event()   # cleared: the node's stop() asked its threads to end
    failed = ThreadFailure(node, running)
    failed(RuntimeError('woken by the stop'), 'physics')
    assert failed.error is None and node.context.ok()
    running.set()
    rclpy.shutdown(context=node.context)   # Ctrl-C
    failed(RuntimeError('a tick that outlived the shutdown'), 'tick')
    assert failed.error is None and failed.exit_code == EXIT_OK


def test_a_thread_that_returns_is_no_failure(node: Node) -> None:
    failed = ThreadFailure(node)
    failed.start(lambda: None, 'tick').join(timeout=5)
    assert failed.error is None and node.context.ok() and failed.exit_code == EXIT_OK
