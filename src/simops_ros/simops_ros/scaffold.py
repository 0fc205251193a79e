"""The one ``main()`` of the SimOps nodes, shaped like ros2/demos' ``demo_nodes_py``.

:func:`run_node` parses the node's own command line first (:mod:`simops_ros.node_args`:
``--help``, stray arguments), initialises rclpy for the block (``with rclpy.init()`` on
every distro: :func:`simops_ros.rclpy_compat.initialised`), builds the node, spins it, and
ends it in one place: a :class:`ConfigError` while building becomes one line
on stderr and exit code 2, Ctrl-C and an external shutdown end it cleanly, and the node's
``stop()`` (when it has one: control and physics threads) runs before ``destroy_node()``.
Once rclpy is shut down, SIGINT is ignored: a node ends with its own exit code even when
the Ctrl-C comes as it exits.

Once the node is built, :func:`gc.freeze` moves every object start-up made (the imports of
torch, MuJoCo and rclpy, the model, the node) out of the collector's view. A full collection
then walks only what the running node allocated since: in the policy node on 2 cores, full
collections over the ~190,000 start-up objects paused its control thread for 110-230 ms,
more than two 20 Hz periods and more than ``stale_state_timeout``. They are handed back to
the collector once the node is destroyed: frozen objects are never finalised, and an rclpy
context left unfinalised at exit keeps its Fast DDS participant's shared-memory segment
(32 MB with ``config/dds/``) in /dev/shm for good.

A node with ``use_sim_time`` follows ``/clock`` on a thread of its own
(:class:`~simops_ros.sim_clock.PolledSimClock`), not in its executor: at the simulator's
1 kHz, rclpy's own subscription cost a node about half a core (``polled_clock`` opts out).
"""

from __future__ import annotations

import gc
import signal
from collections.abc import Callable
from typing import TypeVar

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from simops_core.command_line import EXIT_CONFIG, ConfigError, config_message, fail
from simops_ros import spinning
from simops_ros.node_args import parse_node_args
from simops_ros.rclpy_compat import initialised
from simops_ros.sim_clock import PolledSimClock

NodeT = TypeVar('NodeT', bound=Node)


def run_node(executable: str, description: str, make: Callable[[], NodeT],
             args: list[str] | None = None, codes: dict[int, str] | None = None,
             spin: Callable[[NodeT], None] = spinning.spin,
             exit_code: Callable[[NodeT], int] | None = None,
             signals: SignalHandlerOptions = SignalHandlerOptions.ALL,
             polled_clock: bool = True) -> int:
    """Run the node ``make`` builds until ``spin`` returns, Ctrl-C or shutdown.

    ``args`` defaults to ``sys.argv``; ``codes`` adds exit codes to ``--help``; ``signals``
    NO leaves SIGINT/SIGTERM to ``spin`` (the recorder ends at a wait, never mid-write);
    ``polled_clock`` False keeps rclpy's own /clock subscription, for a node spun by rclpy's
    EventsExecutor (it runs every subscription, polled ones too, and wakes cheaply).
    Returns 2 on a :class:`ConfigError`, else ``exit_code(node)`` (default 0).
    """
    argv = parse_node_args(executable, description, args, codes)
    node: NodeT | None = None
    clock: PolledSimClock | None = None
    try:
        with initialised(argv, signals):
            try:
                node = make()
                clock = PolledSimClock(node) if polled_clock else None
                gc.freeze()   # start-up objects: never walked again by a full collection
                spin(node)
            except ConfigError as exc:
                return fail(executable, EXIT_CONFIG, config_message(exc))
            except (KeyboardInterrupt, ExternalShutdownException):
                pass
            except Exception:
                if rclpy.ok():
                    raise
                # a Ctrl-C shut the context down mid start-up: rcl refuses the rest
            finally:
                if node is not None:
                    stop = getattr(node, 'stop', None)
                    if callable(stop):
                        stop()
                    if clock is not None:
                        clock.stop()
                    node.destroy_node()
                gc.unfreeze()   # the exit's collection finalises the rmw context
    except KeyboardInterrupt:   # the signal re-raised as the context closes
        pass
    finally:
        # Ending already: a Ctrl-C from here on (a launcher's SIGINT to a node that had just
        # finished its work, a terminal's second one) has nothing left to stop. Unhandled,
        # it raised a KeyboardInterrupt past main(), or took SIGINT's default action once
        # the interpreter's exit had reset the handlers, and the node ended killed by SIGINT
        # instead of with its exit code. SIGTERM keeps its action: a launcher's escalation.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return 0 if node is None or exit_code is None else exit_code(node)
